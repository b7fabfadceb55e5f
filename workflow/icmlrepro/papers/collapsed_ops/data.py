"""Every graph of every experiment and seed, written as three tables (graphs, edges, nodes).

Generating them once, in their own rule, lets the property checks, clustering, smoothing and
GNN stages run in parallel on exactly the same graphs. A graph id names its experiment, seed
and variant, e.g. ``smoothing/s3/shortcuts``; the edge table flags injected shortcut edges;
the node table carries positions, ground-truth signals and labels where a graph has them.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import derive_seed

from .graphs import (REAL_GRAPHS, add_shortcuts, geometric_graph, planted_communities,
                     random_complex_graph, real_graph, smooth_signal)

PROPERTY_FAMILIES = ("geometric", "erdos_renyi", "small_world", "blocks")


class GraphSet:
    """Collects graphs with their metadata and turns them into the three tables."""

    def __init__(self) -> None:
        self.graphs, self.edges, self.nodes = [], [], []

    def add(self, gid: str, graph: nx.Graph, *, experiment: str, seed: int, family: str, split: str = "test",
            max_rank: int = 2, shortcuts: set | None = None, **node_columns) -> None:
        n = graph.number_of_nodes()
        if sorted(graph.nodes) != list(range(n)):
            raise ValueError(f"{gid}: vertices must be 0..n-1")
        self.graphs.append({"graph": gid, "experiment": experiment, "seed": seed, "family": family,
                            "split": split, "max_rank": max_rank, "n_vertices": n,
                            "n_edges": graph.number_of_edges()})
        uv = np.array(sorted((min(u, v), max(u, v)) for u, v in graph.edges), dtype=np.int64).reshape(-1, 2)
        short = shortcuts or set()
        self.edges.append(pd.DataFrame({"graph": gid, "u": uv[:, 0], "v": uv[:, 1],
                                        "shortcut": [(int(a), int(b)) in short for a, b in uv]}))
        cols = {"graph": gid, "node": np.arange(n)}
        for name in ("x", "y", "signal"):
            cols[name] = np.asarray(node_columns.get(name, np.full(n, np.nan)), dtype=float)
        cols["label"] = np.asarray(node_columns.get("label", np.full(n, -1)), dtype=np.int64)
        self.nodes.append(pd.DataFrame(cols))

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        return (pd.DataFrame(self.graphs), pd.concat(self.edges, ignore_index=True),
                pd.concat(self.nodes, ignore_index=True))


def property_graphs(gs: GraphSet, seed: int, p) -> None:
    """Random complexes of several families, sizes, densities and ranks, plus the real graphs."""
    q = p["properties"]
    rng = np.random.default_rng(derive_seed(seed, "collapsed_ops", "properties"))
    for i in range(q["n_complexes"]):
        family = PROPERTY_FAMILIES[i % len(PROPERTY_FAMILIES)]
        n = int(rng.integers(q["n_vertices"][0], q["n_vertices"][1] + 1))
        degree = float(rng.uniform(*q["mean_degree"]))
        rank = int(rng.choice(q["max_ranks"]))
        gs.add(f"properties/s{seed}/{i}", random_complex_graph(family, n, degree, rng), experiment="properties",
               seed=seed, family=family, max_rank=rank)
    for name in REAL_GRAPHS:
        gs.add(f"properties/s{seed}/{name}", real_graph(name)[0], experiment="properties", seed=seed,
               family=f"real:{name}", max_rank=max(q["max_ranks"]))


def smoothing_graphs(gs: GraphSet, seed: int, p) -> None:
    """A random geometric graph with a smooth signal, without and with the same added shortcut edges."""
    q = p["smoothing"]
    rng = np.random.default_rng(derive_seed(seed, "collapsed_ops", "smoothing"))
    g, pos = geometric_graph(q["n_vertices"], q["mean_degree"], rng)
    signal = smooth_signal(pos, rng)
    cols = {"x": pos[:, 0], "y": pos[:, 1], "signal": signal}
    gs.add(f"smoothing/s{seed}/no_shortcuts", g, experiment="smoothing", seed=seed, family="geometric",
           max_rank=p["max_rank"], **cols)
    with_short = g.copy()
    added = add_shortcuts(with_short, q["shortcuts"], rng)
    gs.add(f"smoothing/s{seed}/shortcuts", with_short, experiment="smoothing", seed=seed, family="geometric",
           max_rank=p["max_rank"], shortcuts=set(added), **cols)


def clustering_graphs(gs: GraphSet, seed: int, p) -> None:
    """Planted-community graphs: one for choosing each operator's weight (validation), the rest for test."""
    q = p["clustering"]
    for i in range(q["n_graphs"] + 1):
        split = "val" if i == 0 else "test"
        g, labels = planted_communities(q["n_blocks"], q["block_size"], q["p_in"], q["p_out"],
                                        derive_seed(seed, "collapsed_ops", "clustering", i))
        gs.add(f"clustering/s{seed}/{split}{i}", g, experiment="clustering", seed=seed, family="blocks",
               split=split, max_rank=p["max_rank"], label=labels)
    g, labels = real_graph("karate")
    gs.add(f"clustering/s{seed}/karate", g, experiment="clustering", seed=seed, family="real:karate",
           split="real", max_rank=p["max_rank"], label=labels)


def ring_labels(pos: np.ndarray, n_classes: int) -> np.ndarray:
    """Class of each vertex: the quantile bin (equal counts) of its distance from the square's centre."""
    d = np.linalg.norm(pos - 0.5, axis=1)
    return np.searchsorted(np.quantile(d, np.arange(1, n_classes) / n_classes), d).astype(np.int64)


def encoding_graphs(gs: GraphSet, seed: int, p) -> None:
    """A random geometric graph with shortcut edges; labels = distance-from-centre classes (a positional task)."""
    q = p["encodings"]
    rng = np.random.default_rng(derive_seed(seed, "collapsed_ops", "encodings"))
    g, pos = geometric_graph(q["n_vertices"], q["mean_degree"], rng)
    added = add_shortcuts(g, q["shortcuts"], rng)
    gs.add(f"encodings/s{seed}", g, experiment="encodings", seed=seed, family="geometric",
           max_rank=p["max_rank"], shortcuts=set(added), x=pos[:, 0], y=pos[:, 1],
           label=ring_labels(pos, int(q["n_classes"])))


def load_graph(edges: pd.DataFrame, n_vertices: int) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(n_vertices))
    g.add_edges_from(zip(edges["u"].tolist(), edges["v"].tolist()))
    return g


class Graphs:
    """Read access to the data stage's tables: ``graph(gid)``, ``nodes(gid)``, ``select(...)``."""

    def __init__(self, graphs_path, edges_path, nodes_path) -> None:
        self.meta = read_parquet(graphs_path).set_index("graph", drop=False)
        self._edges = {k: d for k, d in read_parquet(edges_path).groupby("graph", sort=False)}
        self._nodes = {k: d.sort_values("node") for k, d in read_parquet(nodes_path).groupby("graph", sort=False)}

    def select(self, **where) -> pd.DataFrame:
        m = self.meta
        for k, v in where.items():
            m = m[m[k] == v]
        return m

    def graph(self, gid: str) -> nx.Graph:
        empty = pd.DataFrame({"u": [], "v": []})
        return load_graph(self._edges.get(gid, empty), int(self.meta.loc[gid, "n_vertices"]))

    def edges(self, gid: str) -> pd.DataFrame:
        return self._edges[gid]

    def nodes(self, gid: str) -> pd.DataFrame:
        return self._nodes[gid]


def run(job) -> None:
    p = job.params
    gs = GraphSet()
    for seed in (int(s) for s in p["seeds"]):
        property_graphs(gs, seed, p)
        smoothing_graphs(gs, seed, p)
        clustering_graphs(gs, seed, p)
    for seed in (int(s) for s in p["encodings"]["seeds"]):  # the PE stage runs its own seeds (config encodings.n_seeds)
        encoding_graphs(gs, seed, p)
    graphs, edges, nodes = gs.tables()
    write_parquet(job.output.graphs, graphs)
    write_parquet(job.output.edges, edges)
    write_parquet(job.output.nodes, nodes)
