"""Build one graph with everything that depends on the graph alone: features, labels, edges,
Laplacian PE, node density and its bins, measured edge homophily (written next to it as JSON)."""

from __future__ import annotations

import re

from icmlrepro.core.io import write_json, write_npz
from icmlrepro.core.seeding import derive_seed

from .graphs import contextual_sbm, digits_knn, edge_homophily, laplacian_pe
from .masking import density_bins, node_density


GRAPH_NAME = re.compile(r"csbm_h(?P<h>[0-9.]+)(_s(?P<s>[0-9.]+))?|digits_knn")


def parse_graph_name(name: str) -> tuple[str, float | None, float | None]:
    """``csbm_h0.2`` -> ("csbm", 0.2, None); ``csbm_h0.1_s4`` -> ("csbm", 0.1, 4.0) (feature signal 4
    instead of the configured one: the difficulty of each graph is set in its name); ``digits_knn``
    -> ("digits_knn", None, None)."""
    m = GRAPH_NAME.fullmatch(name)
    if m is None:
        raise ValueError(f"unknown c2gmae graph {name!r} (csbm_h<homophily>[_s<signal>] or digits_knn)")
    if name == "digits_knn":
        return name, None, None
    return "csbm", float(m["h"]), None if m["s"] is None else float(m["s"])


def build_graph(name: str, s: dict) -> dict:
    kind, homophily, signal = parse_graph_name(name)
    seed = derive_seed(s["seeds"][0], "c2gmae", "graph", name)
    if kind == "csbm":
        c = s["csbm"]
        g = contextual_sbm(c["n_nodes"], c["n_classes"], c["n_features"], c["avg_degree"], homophily,
                           c["signal"] if signal is None else signal, seed)
    else:
        g = digits_knn(s["digits_knn"]["n_nodes"], s["digits_knn"]["k"], seed)
    n = len(g["y"])
    g["pe"] = laplacian_pe(g["edge_index"], n, min(s["model"]["pe_dim"], n - 1))
    g["density"] = node_density(g["x"], g["edge_index"])
    g["bins"] = density_bins(g["density"], s["c2gmae"]["n_density_bins"])
    return g


def run(job) -> None:
    name = job.wildcards.graph
    g = build_graph(name, job.params)
    write_npz(job.output.graph, g, compress=False)
    write_json(job.output.info, {
        "graph": name, "n_nodes": int(len(g["y"])), "n_edges": int(g["edge_index"].shape[1] // 2),
        "n_classes": int(g["y"].max() + 1), "n_features": int(g["x"].shape[1]),
        "edge_homophily": edge_homophily(g["edge_index"], g["y"]),
    })
