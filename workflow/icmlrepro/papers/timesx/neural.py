"""Small neural forecasters pretrained in the pipeline (zero-shot on both benchmarks).

* ``foundation``: an MLP on the standardised last ``history`` values (+ frequency) that corrects the
  seasonal-naive forecast; the stand-in for a time-series foundation model (TimesFM / Moirai): it is
  pretrained on the series alone and never reads text.
* ``textnet``: the stand-in for an LLM forecaster that reads the series and its context: its own
  history trunk plus a text head. The text (all context items of the window) is encoded by ``TextEncoder``:
  word and word-pair presence over a vocabulary fitted on the pretraining texts, and every quantity keyed by
  its neighbouring words (value and thermometer code), so "from 3 months on" and "for 3 months" differ
  (words and keys unseen in pretraining are ignored); the head outputs a relative level adjustment per step,
  added as ``a_k * mean / std`` in standardised units, i.e. "the level changes by a_k of itself", the way
  announcements are phrased. ``textnet_notext`` is its twin trained and run with empty text.
* ``textrev``: a revision method (TextRev): the frozen foundation forecast revised by a text head
  trained on the foundation's residuals.
All are trained with the L1 loss (MAE, the scale of MASE) on the pretraining corpus.
"""

from __future__ import annotations

import re

import numpy as np
import torch
from sklearn.feature_extraction.text import CountVectorizer
from torch import nn

from .sources import FREQ_SEASON as SEASON
from .synthetic import FREQS
from .windows import HORIZON

HMAX = max(HORIZON.values())


def seasonal_repeat(x: np.ndarray, season: int) -> np.ndarray:
    """The last season of ``x`` repeated over HMAX steps (SeasonalNaive in standardised units)."""
    last = x[-season:]
    return np.array([last[k % season] for k in range(HMAX)])


def standardise(history: np.ndarray, length: int) -> tuple[np.ndarray, float, float]:
    """Last ``length`` values (front-padded with the first one), their mean and standard deviation."""
    h = np.asarray(history, dtype=float)[-length:]
    if h.size < length:
        h = np.concatenate([np.full(length - h.size, h[0]), h])
    mu = float(h.mean())
    s = float(h.std())
    if not s > 0:
        s = max(abs(mu) * 1e-3, 1e-8)
    return (h - mu) / s, mu, s


class Batch:
    """Tensors of a set of windows: standardised history, frequency one-hot, level ratio, text, target."""

    def __init__(self, histories, freqs, texts, vectorizer: "TextEncoder", length: int, futures=None):
        xs, mus, ss = zip(*(standardise(h, length) for h in histories))
        seasons = [SEASON[f] for f in freqs]
        self.naive = torch.tensor(np.stack([seasonal_repeat(x, m) for x, m in zip(xs, seasons)]), dtype=torch.float32)
        self.mu = np.array(mus)
        self.s = np.array(ss)
        self.x = torch.tensor(np.stack(xs), dtype=torch.float32)
        self.f = torch.zeros(len(freqs), len(FREQS))
        self.f[torch.arange(len(freqs)), torch.tensor([FREQS.index(f) for f in freqs])] = 1.0
        self.ratio = torch.tensor(self.mu / self.s, dtype=torch.float32)[:, None]
        self.t = torch.tensor(vectorizer.transform(texts), dtype=torch.float32)
        self.horizon = np.array([HORIZON[f] for f in freqs])
        self.mask = torch.tensor(np.arange(HMAX)[None, :] < self.horizon[:, None], dtype=torch.float32)
        if futures is not None:
            y = np.zeros((len(futures), HMAX))
            for i, fut in enumerate(futures):
                y[i, :len(fut)] = (np.asarray(fut) - self.mu[i]) / self.s[i]
            self.y = torch.tensor(y, dtype=torch.float32)

    def with_target(self, futures) -> "Batch":
        """The same windows with another target (same standardisation)."""
        b = self.subset(slice(None))
        y = np.zeros((len(futures), HMAX))
        for i, fut in enumerate(futures):
            y[i, :len(fut)] = (np.asarray(fut) - self.mu[i]) / self.s[i]
        b.y = torch.tensor(y, dtype=torch.float32)
        return b

    def subset(self, idx):
        b = object.__new__(Batch)
        for k, v in vars(self).items():
            setattr(b, k, v[idx])
        return b

    def to_values(self, z: torch.Tensor) -> list[np.ndarray]:
        z = z.detach().numpy()
        return [self.mu[i] + self.s[i] * z[i, :self.horizon[i]] for i in range(z.shape[0])]


def mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                         nn.Linear(hidden, n_out))


class HistoryNet(nn.Module):
    def __init__(self, length: int, hidden: int):
        super().__init__()
        self.net = mlp(length + len(FREQS), hidden, HMAX)

    def forward(self, b: Batch) -> torch.Tensor:
        """A correction to SeasonalNaive (residual form, so the untrained net starts from the reference)."""
        return b.naive + self.net(torch.cat([b.x, b.f], 1))


TEXT_DROPOUT = 0.3  # share of text features zeroed per training window: no single cue carries the reading


class TextHead(nn.Module):
    """Relative level adjustment per step from the context text."""

    def __init__(self, n_text: int, hidden: int):
        super().__init__()
        self.drop = nn.Dropout(TEXT_DROPOUT)
        self.net = mlp(n_text + len(FREQS), hidden, HMAX)

    def forward(self, b: Batch) -> torch.Tensor:
        return self.net(torch.cat([self.drop(b.t), b.f], 1)) * b.ratio


class TextNet(nn.Module):
    def __init__(self, length: int, n_text: int, hidden: int):
        super().__init__()
        self.history = HistoryNet(length, hidden)
        self.text = TextHead(n_text, hidden)

    def forward(self, b: Batch) -> torch.Tensor:
        return self.history(b) + self.text(b)


class TextRevision(nn.Module):
    """Frozen base forecaster + a text head trained on its residuals."""

    def __init__(self, base: HistoryNet, n_text: int, hidden: int):
        super().__init__()
        self.base = base  # shared with the foundation model; only the text head is trained here
        self.text = TextHead(n_text, hidden)

    def forward(self, b: Batch) -> torch.Tensor:
        with torch.no_grad():
            base = self.base(b)
        return base + self.text(b)

    def trainable(self):
        return self.text.parameters()


def fit(model: nn.Module, data: Batch, epochs: int, batch_size: int, lr: float, seed: int) -> list[float]:
    """Adam on the masked L1 loss; returns the mean training loss of every epoch."""
    gen = torch.Generator().manual_seed(seed)
    params = model.trainable() if hasattr(model, "trainable") else model.parameters()
    opt = torch.optim.Adam(params, lr=lr, weight_decay=1e-5)
    n = data.x.shape[0]
    losses = []
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, batch_size):
            b = data.subset(perm[start:start + batch_size])
            loss = ((model(b) - b.y).abs() * b.mask).sum() / b.mask.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * b.x.shape[0]
        losses.append(total / n)
    model.eval()
    return losses


TOKEN = re.compile(r"\d{4}-\d{2}|\d+\.\d+|[a-z0-9]+|[+%-]")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
MAX_QUANTITY = 100.0  # numbers above this (years, counts of days) get no quantity feature


def tokens(text: str) -> list[str]:
    """Lower-case words and numbers (decimals and dates kept whole: "1987q3", "1987-03" are one word) and the symbols + - % as tokens."""
    return TOKEN.findall(text.lower())


def quantity_slots(text: str) -> dict[str, float]:
    """Each number of at most MAX_QUANTITY, keyed by the words around it: ``<prev`` and ``>next``
    (e.g. "from 3 months" gives <from and >months), valued number / 10 and
    summed over the text. This is how the text encoder reads quantities: a bag of words cannot tell the
    3 of "in 3 months" from the 3 of "for 3 months", nor 30 percent from 5 percent."""
    tok = tokens(text)
    out: dict[str, float] = {}
    for i, w in enumerate(tok):
        if not NUMBER.fullmatch(w) or float(w) > MAX_QUANTITY:
            continue
        prev = tok[i - 1] if i else "^"
        nxt = tok[i + 1] if i + 1 < len(tok) else "$"
        for key in (f"<{prev}", f">{nxt}"):
            out[key] = out.get(key, 0.0) + float(w) / 10
    return out


class TextEncoder:
    """The text encoder of the text-aware models (the LLM's reading, miniature): presence of words and
    word pairs over a vocabulary fitted on the pretraining texts, and the quantities of the text keyed
    by their neighbouring words (``quantity_slots``; the most frequent keys of the pretraining texts).
    Words, pairs and keys unseen in pretraining are ignored. Presence features keep an item's words at
    the same value however much other context the window has."""

    def __init__(self, texts: list[str], n_words: int, n_slots: int):
        self.words = CountVectorizer(max_features=n_words, ngram_range=(1, 2), tokenizer=tokens,
                                     token_pattern=None, lowercase=False, binary=True).fit(texts)
        counts: dict[str, int] = {}
        for t in texts:
            for k in quantity_slots(t):
                counts[k] = counts.get(k, 0) + 1
        keep = sorted(counts, key=lambda k: (-counts[k], k))[:n_slots]
        self.slots = {k: i for i, k in enumerate(sorted(keep))}

    def transform(self, texts: list[str]) -> np.ndarray:
        """Word presence, then per quantity key its value / 10 and its thermometer code
        (value >= 1, ..., value >= HMAX: a step count read as "from step j on")."""
        q = np.zeros((len(texts), len(self.slots), 1 + HMAX))
        for i, t in enumerate(texts):
            for k, v in quantity_slots(t).items():
                if k in self.slots:
                    q[i, self.slots[k], 0] = v
                    q[i, self.slots[k], 1:] = 10 * v >= np.arange(1, HMAX + 1)
        return np.concatenate([self.words.transform(texts).toarray(), q.reshape(len(texts), -1)], axis=1)


def text_vectorizer(texts: list[str], n_features: int, n_slots: int = 0) -> TextEncoder:
    """The text encoder fitted on the pretraining texts: ``n_features`` words and word pairs, ``n_slots``
    quantity keys."""
    return TextEncoder(texts, n_features, n_slots)


def build_model(name: str, length: int, n_text: int, hidden: int, base: HistoryNet | None = None) -> nn.Module:
    """One forecaster: ``foundation`` (history only), ``textnet`` or its no-text twin ``textnet_notext``
    (same network, trained and run with empty text), ``textrev`` (a text head revising ``base``)."""
    if name == "foundation":
        return HistoryNet(length, hidden)
    if name in ("textnet", "textnet_notext"):
        return TextNet(length, n_text, hidden)
    if name == "textrev":
        return TextRevision(base if base is not None else HistoryNet(length, hidden), n_text, hidden)
    raise KeyError(name)


def build_models(length: int, n_text: int, hidden: int) -> dict[str, nn.Module]:
    foundation = HistoryNet(length, hidden)
    return {"foundation": foundation, "textnet": TextNet(length, n_text, hidden),
            "textnet_notext": TextNet(length, n_text, hidden), "textrev": TextRevision(foundation, n_text, hidden)}
