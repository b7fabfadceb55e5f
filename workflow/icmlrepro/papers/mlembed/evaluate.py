"""The whole (rank r', exit layer l, output dim d') grid of sub-models, per arm and seed, plus the untrained
encoder of each seed as the floor; metrics.json.

Task: cross-lingual retrieval of test concepts (never trained on) from the phrase in a language to the English
phrase, among all test concepts' English phrases (order twins included: recall@1, MRR), per language group:
``high`` (every training concept) and ``low`` (a small share of them). Cost per sub-model: parameter count,
bytes per stored vector (float32), encoding time per 1,000 queries.
"""

from __future__ import annotations

import time
from itertools import product

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from icmlrepro.core.io import read_parquet, read_torch, write_parquet
from icmlrepro.core.metrics import MetricsFile

from .data import vocab_size
from .losses import mrl_dims
from .model import exit_layers, sub_model_params
from .train import ARMS, as_ids, new_encoder, of_seed

RANDOM = "random"
GROUPS = ("all", "high", "low")


def group_masks(queries: pd.DataFrame) -> dict[str, np.ndarray]:
    res = queries["resource"].to_numpy()
    return {"all": np.isin(res, ["high", "low"]), "high": res == "high", "low": res == "low"}


def retrieval_ranks(q: torch.Tensor, c: torch.Tensor, target: np.ndarray) -> np.ndarray:
    """1-based rank of each query's target among the corpus by cosine similarity (ties count against)."""
    s = F.normalize(q, dim=-1) @ F.normalize(c, dim=-1).T
    own = s[torch.arange(len(q)), torch.as_tensor(np.array(target))]
    return (s >= own[:, None]).sum(1).numpy()


def encode(model, ids: torch.Tensor, exits, rank, factors, chunk: int = 1024) -> list[torch.Tensor]:
    outs = [model(ids[i:i + chunk], exits=exits, rank=rank, factors=factors) for i in range(0, len(ids), chunk)]
    return [torch.cat([o[e] for o in outs]) for e in range(len(exits))]


def score_model(model, data: dict, s: dict) -> list[dict]:
    """One row per (rank, layer, dim, group) with recall@1 and MRR."""
    exits, dims = exit_layers(s["layers"]), mrl_dims(s["d"], s["smallest_dim"])
    masks = group_masks(data["queries"])
    factors = tuple(t.detach() for t in model.factors())
    rows = []
    with torch.no_grad():
        for rank in sorted(s["ranks"]):
            q_all, c_all = (encode(model, data[k], exits, rank, factors) for k in ("q_ids", "c_ids"))
            for (e, layer), dim in product(enumerate(exits), dims):
                rk = retrieval_ranks(q_all[e][:, :dim], c_all[e][:, :dim], data["target"])
                for g, m in masks.items():
                    rows.append({"rank": rank, "layer": layer, "dim": dim, "group": g, "n": int(m.sum()),
                                 "r1": float((rk[m] == 1).mean()), "mrr": float((1.0 / rk[m]).mean())})
    return rows


def eval_data(pairs: pd.DataFrame, concepts: pd.DataFrame) -> dict:
    """One seed's test queries (trained languages) and the English phrases of its test concepts."""
    queries = pairs[(pairs["split"] == "test") & pairs["resource"].isin(["high", "low"])].reset_index(drop=True)
    corpus = concepts[concepts["split"] == "test"].reset_index(drop=True)
    pos = {int(c): i for i, c in enumerate(corpus["concept"])}
    return {"queries": queries, "target": queries["concept"].map(pos).to_numpy(),
            "q_ids": as_ids(queries["ids"]), "c_ids": as_ids(corpus["ids"])}


def encode_seconds_per_1k(model, ids: torch.Tensor, layer: int, repeats: int = 3) -> float:
    """Best-of-``repeats`` wall time to encode 1,000 queries with the sub-model that stops at ``layer``."""
    best = np.inf
    with torch.no_grad():
        for _ in range(repeats):
            t0 = time.perf_counter()
            encode(model, ids, [layer], None, None)
            best = min(best, time.perf_counter() - t0)
    return 1000.0 * best / len(ids)


def load_arm(path, s: dict) -> dict:
    """seed -> (model, record) of one arm's file, and the arm's tuning record under "tuning"."""
    ck = read_torch(path)
    out = {"tuning": ck["tuning"]}
    for seed, rec in ck["seeds"].items():
        m = new_encoder(s, int(seed), ck["mel"])
        m.load_state_dict(rec["state"])
        out[int(seed)] = (m.eval(), rec)
    return out


def grid_table(job, s: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    pairs, concepts = read_parquet(job.input.pairs), read_parquet(job.input.concepts)
    arms = {a: load_arm(job.input[a], s) for a in s["arms"]}
    rows, costs = [], []
    for seed in s["seeds"]:
        data = eval_data(of_seed(pairs, seed), of_seed(concepts, seed))
        models = {RANDOM: (new_encoder(s, seed, False).eval(), {"train_seconds": 0.0})}
        models |= {a: arms[a][seed] for a in s["arms"]}
        for arm, (model, rec) in models.items():
            rows += [r | {"seed": seed, "arm": arm} for r in score_model(model, data, s)]
            costs.append({"seed": seed, "arm": arm, "train_seconds": rec["train_seconds"]})
        ref = models[RANDOM][0]
        for layer in exit_layers(s["layers"]):
            costs.append({"seed": seed, "arm": "encode", "layer": layer,
                          "ms_per_1k": 1000 * encode_seconds_per_1k(ref, data["q_ids"][:1000], layer)})
    grid = pd.DataFrame(rows)
    V = vocab_size(s)
    grid["params"] = [sub_model_params(V, s["d"], s["layers"], s["heads"], s["ff"], 2 * s["phrase_len"], r, l)
                      for r, l in zip(grid["rank"], grid["layer"])]
    grid["bytes_per_vector"] = 4 * grid["dim"]
    return grid, pd.DataFrame(costs), {a: arms[a]["tuning"] for a in s["arms"]}


def build_metrics(grid: pd.DataFrame, costs: pd.DataFrame, pairs: pd.DataFrame, s: dict,
                  tuning: dict | None = None) -> MetricsFile:
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
            for col, unit in (("r1", "recall@1"), ("mrr", "MRR")):
                mf.add(f"{col}.{arm}.{grp}", vals(arm, group=grp, col=col), unit=unit, direction="higher",
                       description=f"{name}: {unit} of the full-size model, language group {grp}")
        corner = vals(arm, rank=min(s["ranks"]), layer=exit_layers(L)[0], dim=s["smallest_dim"])
        mf.add(f"r1.{arm}@smallest", corner, unit="recall@1", direction="higher",
               description=f"{name}: recall@1 of the smallest sub-model (lowest rank, first exit, smallest dim)")
    if {"3dml", "3dml_highres"} <= set(s["arms"]):
        for grp in ("high", "low"):
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
               timing=True, description=f"wall time of training arm {arm} at its tuned learning rate")
    for arm, t in (tuning or {}).items():
        n = len(seeds)
        mf.add(f"lr.{arm}", [float(t["lr"])] * n, unit="learning rate", direction="higher",
               description=f"arm {arm}: learning rate picked on grid {t['grid']} by validation recall@1 of the "
                           f"first seed (ties within one SE {t['se']:.3f} go to the default {t['default']})")
        mf.add(f"tuned_interior.{arm}", [float(t["interior"])] * n, unit="flag", direction="higher",
               description=f"arm {arm}: 1 = the picked learning rate is interior to its grid")
        mf.add(f"tuning_tie.{arm}", [float(t["moved_by_tie"] and t["lr"] == t["default"])] * n,
               unit="flag", direction="lower",
               description=f"arm {arm}: 1 = the default learning rate won by the tie rule (validation scores "
                           f"{[round(v, 3) for v in t['val_r1']]} on {t['n_val']} queries)")
    audit = test_leaks(pairs)
    mf.add("test_concept_pairs_in_training", [float(audit)] * len(seeds), unit="pairs", direction="lower",
           description="training pairs of a validation or test concept, all seeds (the split's audit: must be 0)")
    return mf


def test_leaks(pairs: pd.DataFrame) -> int:
    """Training rows whose concept is a validation or test concept of the same seed (must be none)."""
    held = pairs[pairs["split"] != "train"][["seed", "concept"]].drop_duplicates()
    tr = pairs[pairs["split"] == "train"][["seed", "concept"]]
    return int(len(tr.merge(held, on=["seed", "concept"])))


def run(job) -> None:
    s = job.params
    grid, costs, tuning = grid_table(job, s)
    write_parquet(job.output.grid, grid)
    write_parquet(job.output.costs, costs)
    build_metrics(grid, costs, read_parquet(job.input.pairs), s, tuning).write(job.output.metrics)
