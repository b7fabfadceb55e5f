"""One arm, every seed: tune the learning rate on the first seed's validation concepts, train every seed at
the pick, with equal steps, batch, grid and initial weights in every arm.

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
import torch.nn.functional as F

from icmlrepro.core.io import read_parquet, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import accuracy_se, at_grid_edge, pick_with_ties

from .data import PIVOT, vocab_size
from .losses import matryoshka_loss, mrl_dims, sample_rank
from .model import Encoder, exit_layers

ARMS = {  # arm: (MRL, MLL, MEL, languages trained on)
    "plain": (False, False, False, "all"),
    "mrl": (True, False, False, "all"),
    "mrl_mll": (True, True, False, "all"),
    "3dml": (True, True, True, "all"),
    "3dml_highres": (True, True, True, "high"),
}


def as_ids(rows) -> torch.Tensor:
    """Id matrix of equal-length phrases (every phrase has 2 x phrase_len tokens)."""
    return torch.as_tensor(np.array([list(r) for r in rows], dtype=np.int64))


def new_encoder(s: dict, seed: int, mel: bool) -> Encoder:
    """The seed's initial encoder (identical weights in every arm; MEL holds them as SVD factors)."""
    torch.manual_seed(derive_seed(seed, "mlembed", "init"))
    return Encoder(vocab_size(s), s["d"], s["layers"], s["heads"], s["ff"], 2 * s["phrase_len"], mel)


def of_seed(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    return df[df["seed"] == seed].reset_index(drop=True)


def training_pairs(pairs: pd.DataFrame, languages: str) -> pd.DataFrame:
    tr = pairs[pairs["split"] == "train"]
    return tr[tr["resource"] == "high"] if languages == "high" else tr


def english(lexicon: np.ndarray, atoms: np.ndarray) -> np.ndarray:
    """English token ids of phrases (rows of atoms in slot order; English keeps the order)."""
    return lexicon[atoms].reshape(len(atoms), -1)


def hard_negatives(atoms: np.ndarray, k: int, n_atoms: int, rng: np.random.Generator) -> np.ndarray:
    """k perturbed phrases per row (batch x k x phrase_len atoms): the first swaps two slots (word order),
    the others replace one slot's atom (word meaning)."""
    b, L = atoms.shape
    out = np.repeat(atoms[:, None, :], k, axis=1).copy()
    for i in range(b):
        x, y = rng.choice(L, size=2, replace=False)
        out[i, 0, [x, y]] = out[i, 0, [y, x]]
        for j in range(1, k):
            slot = rng.integers(L)
            new = rng.integers(n_atoms - 1)
            out[i, j, slot] = new + (new >= atoms[i, slot])
    return out


def train(arm: str, pairs: pd.DataFrame, concepts: pd.DataFrame, languages: pd.DataFrame, s: dict, seed: int,
          lr: float):
    """Train one arm on one seed's data at learning rate ``lr``; (model, losses)."""
    mrl, mll, mel, which = ARMS[arm]
    rng = seed_everything(derive_seed(seed, "mlembed", "train", arm))
    model = new_encoder(s, seed, mel)
    if s["steps"] == 0:
        return model, []
    tr = training_pairs(pairs, which).reset_index(drop=True)
    lex = np.stack([np.asarray(w) for w in languages.loc[languages["lang"] == PIVOT, "lexicon"].iloc[0]])
    atoms_of = {int(c): np.asarray(a) for c, a in zip(concepts["concept"], concepts["atoms"])}
    q_ids = as_ids(tr["ids"])
    own = tr["concept"].to_numpy()
    own_atoms = np.stack([atoms_of[int(c)] for c in own])
    exits = exit_layers(s["layers"]) if mll else [s["layers"]]
    dims = mrl_dims(s["d"], s["smallest_dim"]) if mrl else [s["d"]]
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    k, losses = s["hard_negatives"], []
    for _ in range(s["steps"]):
        b = rng.choice(len(tr), size=min(s["batch"], len(tr)), replace=False)
        neg = hard_negatives(own_atoms[b], k, s["n_atoms"], rng)
        rank = sample_rank(s["ranks"], rng) if mel else None
        ids = torch.cat([q_ids[b], torch.as_tensor(english(lex, own_atoms[b])),
                         torch.as_tensor(english(lex, neg.reshape(-1, neg.shape[-1])))])
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


def recall_at_1(model, queries: pd.DataFrame, concepts: pd.DataFrame, split: str) -> float:
    """Full-size recall@1 of ``queries`` (split ``split``) among that split's English concepts."""
    corpus = concepts[concepts["split"] == split].reset_index(drop=True)
    q = queries[queries["split"] == split]
    pos = {int(c): i for i, c in enumerate(corpus["concept"])}
    with torch.no_grad():
        zq = F.normalize(model(as_ids(q["ids"]))[0], dim=-1)
        zc = F.normalize(model(as_ids(corpus["ids"]))[0], dim=-1)
    sim = zq @ zc.T
    target = torch.as_tensor(q["concept"].map(pos).to_numpy())
    own = sim[torch.arange(len(q)), target]
    return float(((sim >= own[:, None]).sum(1) == 1).float().mean()), len(q)


def validation_queries(pairs: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Validation queries in the languages the arm trains on."""
    langs = set(training_pairs(pairs, ARMS[arm][3])["lang"])
    return pairs[pairs["lang"].isin(langs)]


def run(job) -> None:
    s, arm = job.params, job.wildcards.arm
    pairs, concepts, languages = (read_parquet(p) for p in (job.input.pairs, job.input.concepts, job.input.languages))
    seeds, grid, default = list(s["seeds"]), list(s["lr_grid"]), s["lr"]
    out = {"arm": arm, "mel": ARMS[arm][2], "seeds": {}}
    first = seeds[0]
    P, C, Lg = of_seed(pairs, first), of_seed(concepts, first), of_seed(languages, first)
    val_q = validation_queries(P, arm)
    scores, models = [], {}
    for lr in grid:  # the same grid and budget for every arm, tuned on the first seed's validation concepts
        t0 = time.perf_counter()
        m, losses = train(arm, P, C, Lg, s, first, lr)
        r1, n_val = recall_at_1(m.eval(), val_q, C, "val")
        scores.append(r1)
        models[lr] = (m, losses, time.perf_counter() - t0)
    se = accuracy_se(max(scores), n_val)
    pick = pick_with_ties(grid, scores, default, higher_is_better=True, tolerance=se)
    out["tuning"] = {"grid": grid, "val_r1": scores, "n_val": n_val, "se": se, "lr": pick.value,
                     "tied": pick.tied, "best": pick.best, "moved_by_tie": pick.moved_by_tie,
                     "interior": not at_grid_edge(pick.value, grid), "default": default}
    for seed in seeds:
        if seed == first:
            m, losses, secs = models[pick.value]
        else:
            t0 = time.perf_counter()
            m, losses = train(arm, of_seed(pairs, seed), of_seed(concepts, seed), of_seed(languages, seed), s,
                              seed, pick.value)
            secs = time.perf_counter() - t0
        out["seeds"][seed] = {"state": m.state_dict(), "losses": losses, "train_seconds": secs}
    write_torch(job.output.model, out)
