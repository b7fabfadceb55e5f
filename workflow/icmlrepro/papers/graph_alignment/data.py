"""All datasets of the paper, per seed: alignment pairs per (source, noise), regression graphs, and
graphs for structure reconstruction. Generated here (networkx), nothing is downloaded.

The file holds plain tensors and numbers only (``torch.load(weights_only=True)`` reads it).
"""

from __future__ import annotations

import numpy as np
import torch

from icmlrepro.core.io import atomic_path
from icmlrepro.core.seeding import derive_seed

from .graphs import make_pair, real_graphs, regression_graph

PAPER = "graph_alignment"


def dataset_key(source: str, noise: float) -> str:
    return f"{source}@{noise:g}"


def _tensor_pair(pair: dict) -> dict:
    return {"n": int(pair["n"]), "base": torch.as_tensor(pair["base"]),
            "corrupted": torch.as_tensor(pair["corrupted"]), "perm": torch.as_tensor(pair["perm"])}


def _sizes(rng, lo_hi, count):
    lo, hi = lo_hi
    return rng.integers(lo, hi + 1, size=count)


def alignment_sets(seed: int, p, real) -> dict:
    out = {}
    for source in p["sources"]:
        for noise in p["noises"]:
            rng = np.random.default_rng(derive_seed(seed, PAPER, "pairs", source, noise))
            split = {}
            for part, count in (("train", p["n_train_pairs"]), ("test", p["n_test_pairs"])):
                split[part] = [_tensor_pair(make_pair(source, int(n), p["degree"], noise, rng, real))
                               for n in _sizes(rng, p["n_nodes"], count)]
            out[dataset_key(source, noise)] = split
    return out


def transfer_sets(seed: int, p, real) -> dict:
    t = p["transfer"]
    rng = np.random.default_rng(derive_seed(seed, PAPER, "regression"))
    regression = {}
    for part, count in (("train", t["n_regression_train"]), ("test", t["n_regression_test"])):
        graphs = []
        for n in _sizes(rng, p["n_nodes"], count):
            edges, y = regression_graph(int(n), p["degree"], rng)
            graphs.append({"n": int(n), "edges": torch.as_tensor(edges), "y": y})
        regression[part] = graphs
    rng = np.random.default_rng(derive_seed(seed, PAPER, "reconstruction"))
    recon = {part: [_tensor_pair(make_pair(t["source"], int(n), p["degree"], 0.0, rng, real))
                    for n in _sizes(rng, p["n_nodes"], count)]
             for part, count in (("train", t["n_recon_train"]), ("test", t["n_recon_test"]))}
    return {"regression": regression, "reconstruction": recon}


def build(p) -> dict:
    real = real_graphs()
    return {int(s): {"alignment": alignment_sets(int(s), p, real), "transfer": transfer_sets(int(s), p, real)}
            for s in p["seeds"]}


def run(job) -> None:
    data = build(job.params)
    with atomic_path(job.output.datasets) as tmp:
        torch.save(data, tmp)
