"""All datasets of the paper, per seed: alignment pairs per (source, noise), regression graphs, graphs
for structure reconstruction, and a separate tuning stream. Generated here (networkx), nothing is
downloaded.

Train and test never share a base graph: Erdos-Renyi graphs are independent draws (and
``check_disjoint`` rejects a test graph isomorphic to a training graph), and real subgraphs come from
node-disjoint halves of each real graph (``graphs.split_real``, one split per seed), so no real node
appears in both. ``build`` runs the audit on every split it writes.

The file holds plain tensors and numbers only (``torch.load(weights_only=True)`` reads it).
"""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import torch

from icmlrepro.core.io import write_torch
from icmlrepro.core.seeding import derive_seed

from .graphs import make_pair, real_graphs, regression_graph, split_real

PAPER = "graph_alignment"


def dataset_key(source: str, noise: float) -> str:
    return f"{source}@{noise:g}"


def _tensor_pair(pair: dict) -> dict:
    out = {"n": int(pair["n"]), "base": torch.as_tensor(pair["base"]),
           "corrupted": torch.as_tensor(pair["corrupted"]), "perm": torch.as_tensor(pair["perm"])}
    if "nodes" in pair:  # real subgraph: where it comes from, for the train/test audit
        out["graph"], out["nodes"] = int(pair["graph"]), torch.as_tensor(pair["nodes"])
    return out


def _sizes(rng, lo_hi, count):
    lo, hi = lo_hi
    return rng.integers(lo, hi + 1, size=count)


def runs(p) -> list[tuple[str, str, float]]:
    """(input, source, noise) of every dataset trained: the headline input over the whole ladder, each
    extra input at the main noise level."""
    out = [(p["input"], s, float(n)) for s in p["sources"] for n in p["noises"]]
    return out + [(x, s, float(p["main_noise"])) for x in p["extra_inputs"] for s in p["sources"]]


def pair_split(source: str, noise: float, p, rng, parts: dict, counts: dict) -> dict:
    """{"train": [...], "test": [...]} pairs; real base graphs of a part come from that part's nodes only."""
    return {part: [_tensor_pair(make_pair(source, int(n), p["degree"], noise, rng, parts[part]))
                   for n in _sizes(rng, p["n_nodes"], count)]
            for part, count in counts.items()}


def alignment_sets(seed: int, p, parts: dict) -> dict:
    counts = {"train": p["n_train_pairs"], "test": p["n_test_pairs"]}
    out = {}
    for source in p["sources"]:
        for noise in p["noises"]:
            rng = np.random.default_rng(derive_seed(seed, PAPER, "pairs", source, noise))
            out[dataset_key(source, noise)] = pair_split(source, noise, p, rng, parts, counts)
    return out


def transfer_sets(seed: int, p, parts: dict) -> dict:
    t = p["transfer"]
    rng = np.random.default_rng(derive_seed(seed, PAPER, "regression"))
    regression = {}
    for part, count in (("train", t["n_regression_train"]), ("test", t["n_regression_test"])):
        graphs = []
        for n in _sizes(rng, t["regression_n_nodes"], count):
            edges, y = regression_graph(int(n), p["degree"], rng)
            graphs.append({"n": int(n), "edges": torch.as_tensor(edges), "y": y})
        regression[part] = graphs
    rng = np.random.default_rng(derive_seed(seed, PAPER, "reconstruction"))
    recon = pair_split(t["source"], 0.0, p, rng, parts, {"train": t["n_recon_train"], "test": t["n_recon_test"]})
    return {"regression": regression, "reconstruction": recon}


def tuning_set(seeds, p, real) -> dict:
    """The tuning stream: training and validation pairs of the tuning dataset (``tune.source`` at
    ``main_noise``), from its own seed and real-node split, never from a seed's test pairs."""
    base = int(min(seeds))
    parts = split_real(real, np.random.default_rng(derive_seed(base, PAPER, "tune_split")))
    rng = np.random.default_rng(derive_seed(base, PAPER, "tune_pairs"))
    # the validation pairs come from the test half of the tuning split, like a seed's test pairs
    return pair_split(p["tune"]["source"], float(p["main_noise"]), p, rng, parts,
                      {"train": p["n_train_pairs"], "test": p["n_test_pairs"]})


def _fingerprint(pair: dict) -> str:
    g = nx.Graph()
    g.add_nodes_from(range(int(pair["n"])))
    g.add_edges_from(map(tuple, torch.as_tensor(pair["base"]).T.tolist()))
    with warnings.catch_warnings():  # networkx 3.5 notes that its hashes changed; only equality matters here
        warnings.simplefilter("ignore", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(g, iterations=3)


def overlap(split: dict) -> list[str]:
    """What a test pair shares with the training pairs: real nodes (graph, node id) drawn in both, or
    a test base graph with the Weisfeiler-Lehman hash of a training base graph. Empty when disjoint."""
    found = []
    train_nodes = {(p["graph"], int(v)) for p in split["train"] if "nodes" in p for v in p["nodes"]}
    test_nodes = {(p["graph"], int(v)) for p in split["test"] if "nodes" in p for v in p["nodes"]}
    if shared := train_nodes & test_nodes:
        found.append(f"{len(shared)} real nodes in train and test pairs, e.g. {sorted(shared)[:3]}")
    train_hashes = {_fingerprint(p) for p in split["train"] if "nodes" not in p}
    same = sum(_fingerprint(p) in train_hashes for p in split["test"] if "nodes" not in p)
    if same:
        found.append(f"{same} test base graphs have the WL hash of a training base graph")
    return found


def check_disjoint(name: str, split: dict) -> None:
    if found := overlap(split):
        raise ValueError(f"train and test base graphs of {name} overlap: {'; '.join(found)}")


def build(p) -> dict:
    real = real_graphs()
    out = {}
    for s in p["seeds"]:
        parts = split_real(real, np.random.default_rng(derive_seed(int(s), PAPER, "real_split")))
        out[int(s)] = {"alignment": alignment_sets(int(s), p, parts), "transfer": transfer_sets(int(s), p, parts)}
        for key, split in out[int(s)]["alignment"].items():
            check_disjoint(f"seed {s} {key}", split)
        check_disjoint(f"seed {s} reconstruction", out[int(s)]["transfer"]["reconstruction"])
    out["tune"] = tuning_set(p["seeds"], p, real)
    check_disjoint("the tuning stream", out["tune"])
    return out


def run(job) -> None:
    data = build(job.params)
    write_torch(job.output.datasets, data)
