"""One arm x seed: train the encoder with equal steps, batch and optimiser in every arm.

Arms (the cause each one adds): ``plain`` (full-size InfoNCE, cut only at evaluation: the baseline),
``mrl`` (+ Matryoshka output dims), ``mrl_mll`` (+ exits at layers), ``3dml`` (+ MEL: factorised token
embedding with a sampled rank per step), ``3dml_highres`` (3D-ML trained on high-resource languages only:
the control of the low-resource claim). Every arm of a seed starts from the same initial weights.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_parquet, read_tokenizer, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything

from .losses import matryoshka_loss, mrl_dims, sample_rank
from .model import Encoder, exit_layers

ARMS = {  # arm: (MRL, MLL, MEL, languages trained on)
    "plain": (False, False, False, "all"),
    "mrl": (True, False, False, "all"),
    "mrl_mll": (True, True, False, "all"),
    "3dml": (True, True, True, "all"),
    "3dml_highres": (True, True, True, "high"),
}


def tokenize(tok, texts, max_len: int) -> torch.Tensor:
    """Padded id matrix (pad id 0), truncated to ``max_len``."""
    ids = np.zeros((len(texts), max_len), dtype=np.int64)
    for i, enc in enumerate(tok.encode_batch(list(texts))):
        x = enc.ids[:max_len]
        ids[i, : len(x)] = x
    return torch.as_tensor(ids)


def trim(ids: torch.Tensor) -> torch.Tensor:
    """Drop the columns that are padding in every row (names are short; attention cost is quadratic)."""
    return ids[:, : max(int((ids != 0).sum(1).max()), 1)]


def new_encoder(s: dict, vocab: int, seed: int, mel: bool) -> Encoder:
    """The seed's initial encoder (identical weights in every arm; MEL holds them as SVD factors)."""
    torch.manual_seed(derive_seed(seed, "mlembed", "init"))
    return Encoder(vocab, s["d"], s["layers"], s["heads"], s["ff"], s["max_len"], mel)


def training_pairs(pairs: pd.DataFrame, languages: str) -> pd.DataFrame:
    tr = pairs[pairs["split"] == "train"]
    return tr[tr["resource"] == "high"] if languages == "high" else tr


def train(arm: str, pairs: pd.DataFrame, concepts: pd.DataFrame, tok, s: dict, seed: int):
    mrl, mll, mel, languages = ARMS[arm]
    rng = seed_everything(derive_seed(seed, "mlembed", "train", arm))
    model = new_encoder(s, tok.get_vocab_size(), seed, mel)
    if s["steps"] == 0:
        return model, []
    tr = training_pairs(pairs, languages).reset_index(drop=True)
    train_concepts = concepts[~concepts["test"]].reset_index(drop=True)
    cidx = {c: i for i, c in enumerate(train_concepts["concept"])}
    by_type = {t: g.index.to_numpy() for t, g in train_concepts.groupby("type")}
    q_ids = tokenize(tok, tr["text"], s["max_len"])
    t_ids = tokenize(tok, train_concepts["target"], s["max_len"])
    own = tr["concept"].map(cidx).to_numpy()
    ctype = tr["concept"].str.split(":").str[0].to_numpy()
    exits = exit_layers(s["layers"]) if mll else [s["layers"]]
    dims = mrl_dims(s["d"], s["smallest_dim"]) if mrl else [s["d"]]
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=0.01)
    k, losses = s["hard_negatives"], []
    for _ in range(s["steps"]):
        b = rng.choice(len(tr), size=min(s["batch"], len(tr)), replace=False)
        neg = np.stack([rng.choice(np.setdiff1d(by_type[ctype[i]], [own[i]]), size=k) for i in b])
        rank = sample_rank(s["ranks"], rng) if mel else None
        ids = trim(torch.cat([q_ids[b], t_ids[own[b]], t_ids[neg.reshape(-1)]]))
        outs = model(ids, exits=exits, rank=rank)
        n = len(b)
        loss = matryoshka_loss([o[:n] for o in outs], [o[n:2 * n] for o in outs],
                               [o[2 * n:].reshape(n, k, -1) for o in outs], dims, s["tau"],
                               torch.as_tensor(own[b]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return model, losses


def run(job) -> None:

    s, arm, seed = job.params, job.wildcards.arm, int(job.wildcards.seed)
    t0 = time.perf_counter()
    model, losses = train(arm, read_parquet(job.input.pairs), read_parquet(job.input.concepts),
                          read_tokenizer(job.input.tokenizer), s, seed)
    write_torch(job.output.model, {"arm": arm, "seed": seed, "mel": ARMS[arm][2], "state": model.state_dict(),
                                   "losses": losses, "train_seconds": time.perf_counter() - t0})
