"""The whole (rank r', exit layer l, output dim d') grid of sub-models, per arm and seed, plus the untrained
encoder of each seed as the floor; metrics.json.

Task: cross-lingual retrieval of test concepts (never trained on) from their name in a language to the
English name, among all test concepts' English names (recall@1, MRR), per language group: ``high`` and
``low`` (trained languages), ``heldout`` (languages never trained on). Classification: the concept's type
by the nearest centroid of the training concepts' English-name embeddings. Cost per sub-model: parameter
count, bytes per stored vector (float32), encoding time per 1,000 queries.
"""

from __future__ import annotations

import time
from itertools import product

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from icmlrepro.core.io import read_parquet, read_tokenizer, read_torch, write_parquet
from icmlrepro.core.metrics import MetricsFile

from .losses import mrl_dims
from .model import exit_layers, sub_model_params
from .train import ARMS, new_encoder, tokenize, trim

RANDOM = "random"
GROUPS = ("all", "high", "low", "heldout")


def group_masks(queries: pd.DataFrame) -> dict[str, np.ndarray]:
    held = queries["heldout"].to_numpy()
    return {"all": np.ones(len(queries), bool), "high": ~held & (queries["resource"] == "high").to_numpy(),
            "low": ~held & (queries["resource"] == "low").to_numpy(), "heldout": held}


def retrieval_ranks(q: torch.Tensor, c: torch.Tensor, target: np.ndarray) -> np.ndarray:
    """1-based rank of each query's target among the corpus by cosine similarity (ties count against)."""
    s = F.normalize(q, dim=-1) @ F.normalize(c, dim=-1).T
    own = s[torch.arange(len(q)), torch.as_tensor(np.array(target))]
    return (s >= own[:, None]).sum(1).numpy()


def encode(model, ids: torch.Tensor, exits, rank, factors, chunk: int = 512) -> list[torch.Tensor]:
    outs = [model(trim(ids[i:i + chunk]), exits=exits, rank=rank, factors=factors) for i in range(0, len(ids), chunk)]
    return [torch.cat([o[e] for o in outs]) for e in range(len(exits))]


def score_model(model, data: dict, s: dict) -> list[dict]:
    """One row per (rank, layer, dim, group) with recall@1, MRR and type accuracy."""
    exits, dims = exit_layers(s["layers"]), mrl_dims(s["d"], s["smallest_dim"])
    masks = group_masks(data["queries"])
    factors = tuple(t.detach() for t in model.factors())
    rows = []
    with torch.no_grad():
        for rank in sorted(s["ranks"]):
            q_all, c_all, tr_all = (encode(model, data[k], exits, rank, factors) for k in ("q_ids", "c_ids", "tr_ids"))
            for (e, layer), dim in product(enumerate(exits), dims):
                q, c, tr = q_all[e][:, :dim], c_all[e][:, :dim], tr_all[e][:, :dim]
                rk = retrieval_ranks(q, c, data["target"])
                cent = torch.stack([F.normalize(tr[data["tr_type"] == t], dim=-1).mean(0) for t in data["types"]])
                pred = (F.normalize(q, dim=-1) @ F.normalize(cent, dim=-1).T).argmax(1).numpy()
                hit = np.asarray(data["types"])[pred] == data["q_type"]
                for g, m in masks.items():
                    rows.append({"rank": rank, "layer": layer, "dim": dim, "group": g, "n": int(m.sum()),
                                 "r1": float((rk[m] == 1).mean()), "mrr": float((1.0 / rk[m]).mean()),
                                 "type_acc": float(hit[m].mean())})
    return rows


def eval_data(pairs: pd.DataFrame, concepts: pd.DataFrame, tok, max_len: int) -> dict:
    queries = pairs[pairs["split"] == "eval"].reset_index(drop=True)
    corpus = concepts[concepts["test"]].reset_index(drop=True)
    train_c = concepts[~concepts["test"]].reset_index(drop=True)
    types = sorted(concepts["type"].unique())
    pos = {c: i for i, c in enumerate(corpus["concept"])}
    return {"queries": queries, "target": queries["concept"].map(pos).to_numpy(),
            "q_ids": tokenize(tok, queries["text"], max_len), "c_ids": tokenize(tok, corpus["target"], max_len),
            "tr_ids": tokenize(tok, train_c["target"], max_len), "types": types,
            "tr_type": train_c["type"].to_numpy(), "q_type": queries["concept"].str.split(":").str[0].to_numpy()}


def encode_seconds_per_1k(model, ids: torch.Tensor, layer: int, repeats: int = 3) -> float:
    """Best-of-``repeats`` wall time to encode 1,000 queries with the sub-model that stops at ``layer``."""
    best = np.inf
    with torch.no_grad():
        for _ in range(repeats):
            t0 = time.perf_counter()
            encode(model, ids, [layer], None, None)
            best = min(best, time.perf_counter() - t0)
    return 1000.0 * best / len(ids)


def load_model(path, s: dict, vocab: int):
    ck = read_torch(path)
    model = new_encoder(s, vocab, ck["seed"], ck["mel"])
    model.load_state_dict(ck["state"])
    return model.eval(), ck


def grid_table(job, s: dict) -> tuple[pd.DataFrame, pd.DataFrame]:

    tok = read_tokenizer(job.input.tokenizer)
    pairs, concepts = read_parquet(job.input.pairs), read_parquet(job.input.concepts)
    data, vocab = eval_data(pairs, concepts, tok, s["max_len"]), tok.get_vocab_size()
    rows, costs = [], []
    for seed in s["seeds"]:
        models = {RANDOM: (new_encoder(s, vocab, seed, False).eval(), {"train_seconds": 0.0})}
        models |= {a: load_model(job.input[f"{a}_seed{seed}"], s, vocab) for a in s["arms"]}
        for arm, (model, ck) in models.items():
            rows += [r | {"seed": seed, "arm": arm} for r in score_model(model, data, s)]
            costs.append({"seed": seed, "arm": arm, "train_seconds": ck["train_seconds"]})
        ref = models[RANDOM][0]
        for layer in exit_layers(s["layers"]):
            costs.append({"seed": seed, "arm": "encode", "layer": layer,
                          "ms_per_1k": 1000 * encode_seconds_per_1k(ref, data["q_ids"][:1000], layer)})
    grid = pd.DataFrame(rows)
    grid["params"] = [sub_model_params(vocab, s["d"], s["layers"], s["heads"], s["ff"], s["max_len"], r, l)
                      for r, l in zip(grid["rank"], grid["layer"])]
    grid["bytes_per_vector"] = 4 * grid["dim"]
    return grid, pd.DataFrame(costs)


def build_metrics(grid: pd.DataFrame, costs: pd.DataFrame, pairs: pd.DataFrame, s: dict) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("mlembed", s["scale"], replicate="seed", replicates=seeds)
    d, L = s["d"], s["layers"]
    g = grid.set_index(["arm", "rank", "layer", "dim", "group", "seed"]).sort_index()

    def vals(arm, rank=None, layer=None, dim=None, group="all", col="r1"):
        return [float(g.loc[(arm, rank or d, layer or L, dim or d, group, sd), col]) for sd in seeds]

    for arm in [RANDOM, *s["arms"]]:
        name = "untrained encoder" if arm == RANDOM else f"arm {arm}"
        for dim in mrl_dims(d, s["smallest_dim"]):
            mf.add(f"r1.{arm}@dim{dim}", vals(arm, dim=dim), unit="recall@1", direction="higher",
                   description=f"{name}: recall@1, all eval languages, output dim {dim} (full rank, all layers)")
        for layer in exit_layers(L)[:-1]:
            mf.add(f"r1.{arm}@layer{layer}", vals(arm, layer=layer), unit="recall@1", direction="higher",
                   description=f"{name}: recall@1, exit after layer {layer} of {L} (full rank and dim)")
        for rank in sorted(s["ranks"])[:-1]:
            mf.add(f"r1.{arm}@rank{rank}", vals(arm, rank=rank), unit="recall@1", direction="higher",
                   description=f"{name}: recall@1, token-embedding rank {rank} of {d} (all layers, full dim)")
        for grp in GROUPS:
            for col, unit in (("r1", "recall@1"), ("mrr", "MRR"), ("type_acc", "accuracy")):
                mf.add(f"{col}.{arm}.{grp}", vals(arm, group=grp, col=col), unit=unit, direction="higher",
                       description=f"{name}: {unit} of the full-size model, language group {grp}")
        corner = vals(arm, rank=min(s["ranks"]), layer=exit_layers(L)[0], dim=s["smallest_dim"])
        mf.add(f"r1.{arm}@smallest", corner, unit="recall@1", direction="higher",
               description=f"{name}: recall@1 of the smallest sub-model (lowest rank, first exit, smallest dim)")
    if {"3dml", "3dml_highres"} <= set(s["arms"]):
        for grp in ("high", "low", "heldout"):
            gain = np.subtract(vals("3dml", group=grp), vals("3dml_highres", group=grp))
            mf.add(f"r1_gain_all_langs_vs_highres_only.{grp}", gain, unit="recall@1", direction="higher",
                   description=f"recall@1 of 3D-ML trained on all languages minus 3D-ML trained on high-resource "
                               f"languages only, language group {grp}")
    for rank, layer in product(sorted(s["ranks"]), exit_layers(L)):
        p = grid[(grid["rank"] == rank) & (grid["layer"] == layer)]["params"].iloc[0]
        mf.add(f"params@rank{rank}.layer{layer}", [float(p)] * len(seeds), unit="parameters", direction="lower",
               description=f"parameters of the sub-model with token-embedding rank {rank} and {layer} layer(s)")
    enc = costs[costs["arm"] == "encode"].set_index(["layer", "seed"])["ms_per_1k"]
    for layer in exit_layers(L):
        mf.add(f"encode_ms_per_1k@layer{layer}", [float(enc.loc[(layer, sd)]) for sd in seeds], unit="ms",
               direction="lower", timing=True, description=f"wall time to encode 1,000 queries, exit at layer {layer}")
    tr = costs[costs["arm"].isin(s["arms"])].set_index(["arm", "seed"])["train_seconds"]
    for arm in s["arms"]:
        mf.add(f"train_seconds.{arm}", [float(tr.loc[(arm, sd)]) for sd in seeds], unit="s", direction="lower",
               timing=True, description=f"wall time of training arm {arm} (equal steps in every arm)")
    audit = heldout_leaks(pairs)
    mf.add("heldout_language_pairs_in_training", [float(audit)] * len(seeds), unit="pairs", direction="lower",
           description="training pairs whose language is held out (the split's audit: must be 0)")
    return mf


def heldout_leaks(pairs: pd.DataFrame) -> int:
    """Training pairs in a held-out language or of a test concept (both must be absent from training)."""
    tr = pairs[pairs["split"] == "train"]
    return int((tr["heldout"] | tr["test_concept"]).sum())


def run(job) -> None:
    s = job.params
    grid, costs = grid_table(job, s)
    write_parquet(job.output.grid, grid)
    write_parquet(job.output.costs, costs)
    build_metrics(grid, costs, read_parquet(job.input.pairs), s).write(job.output.metrics)
