"""Build one graph, redrawn for every seed, with everything that depends on the graph alone: features,
labels, edges, Laplacian PE, node density and its bins; all seeds' draws in one .npz (keys
``<array>__seed<s>``), the measured edge homophily per draw and its mean in a JSON beside it."""

from __future__ import annotations

import re

from icmlrepro.core.io import write_json, write_npz
from icmlrepro.core.seeding import derive_seed

from .graphs import contextual_sbm, digits_knn, edge_homophily, laplacian_pe
from .masking import density_bins, node_density


GRAPH_NAME = re.compile(r"csbm_h(?P<h>[0-9.]+)(_s(?P<s>[0-9.]+))?(?P<pair>_pair)?|digits_knn")


def parse_graph_name(name: str) -> tuple[str, float | None, float | None, bool]:
    """``csbm_h0.2`` -> ("csbm", 0.2, None, False); ``csbm_h0.1_s4`` -> ("csbm", 0.1, 4.0, False) (feature
    signal 4 instead of the configured one: the difficulty of each graph is set in its name);
    ``csbm_h0.1_s1_pair`` -> ("csbm", 0.1, 1.0, True) (between-class edges to one partner class);
    ``digits_knn`` -> ("digits_knn", None, None, False)."""
    m = GRAPH_NAME.fullmatch(name)
    if m is None:
        raise ValueError(f"unknown c2gmae graph {name!r} (csbm_h<homophily>[_s<signal>][_pair] or digits_knn)")
    if name == "digits_knn":
        return name, None, None, False
    return "csbm", float(m["h"]), None if m["s"] is None else float(m["s"]), m["pair"] is not None


def build_graph(name: str, s: dict, seed: int) -> dict:
    """One draw of graph ``name`` for replicate ``seed``: every seed redraws the generated graph (the
    SBM's edges and features; the digits subsample and its kNN graph)."""
    kind, homophily, signal, paired = parse_graph_name(name)
    gseed = derive_seed(seed, "c2gmae", "graph", name)
    if kind == "csbm":
        c = s["csbm"]
        g = contextual_sbm(c["n_nodes"], c["n_classes"], c["n_features"], c["avg_degree"], homophily,
                           c["signal"] if signal is None else signal, gseed, paired)
    else:
        g = digits_knn(s["digits_knn"]["n_nodes"], s["digits_knn"]["k"], gseed)
    n = len(g["y"])
    g["pe"] = laplacian_pe(g["edge_index"], n, min(s["model"]["pe_dim"], n - 1))
    g["density"] = node_density(g["x"], g["edge_index"])
    g["bins"] = density_bins(g["density"], s["c2gmae"]["n_density_bins"])
    return g


def seed_key(key: str, seed: int) -> str:
    """Array ``key`` of the draw for ``seed`` inside a graph's .npz (all seeds of a graph in one file)."""
    return f"{key}__seed{int(seed)}"


def graph_of_seed(arrays: dict, seed: int) -> dict:
    """The arrays of one seed's draw from a graph's .npz."""
    suffix = f"__seed{int(seed)}"
    out = {k[: -len(suffix)]: v for k, v in arrays.items() if k.endswith(suffix)}
    if not out:
        raise KeyError(f"no draw for seed {seed} in this graph file")
    return out


def run(job) -> None:
    name = job.wildcards.graph
    s = job.params
    arrays, per_seed = {}, []
    for seed in s["seeds"]:
        g = build_graph(name, s, int(seed))
        arrays.update({seed_key(k, seed): v for k, v in g.items()})
        per_seed.append({"seed": int(seed), "n_edges": int(g["edge_index"].shape[1] // 2),
                         "edge_homophily": edge_homophily(g["edge_index"], g["y"])})
    write_npz(job.output.graph, arrays, compress=False)
    write_json(job.output.info, {
        "graph": name, "n_nodes": int(len(g["y"])), "n_classes": int(g["y"].max() + 1),
        "n_features": int(g["x"].shape[1]), "per_seed": per_seed,
        "edge_homophily": float(sum(r["edge_homophily"] for r in per_seed) / len(per_seed)),
    })
