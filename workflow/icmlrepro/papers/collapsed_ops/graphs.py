"""Graph generators and real graphs for the experiments, all offline and seeded.

Random geometric graphs (uniform points in the unit square, radius set for a target mean
degree) carry many triangles, which is what makes their clique complexes interesting; injected
shortcut edges join random far-apart vertex pairs and close almost no triangle. Planted
communities come from networkx's stochastic block model, and the real graphs are networkx built-ins (Zachary's karate club
with its two factions, Les Miserables co-appearances, Florentine families).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

REAL_GRAPHS = ("karate", "les_miserables", "florentine_families")


def relabelled(graph: nx.Graph) -> nx.Graph:
    """A simple undirected copy with vertices 0..n-1 (in sorted order of the old labels), no weights."""
    try:
        nodes = sorted(graph.nodes)
    except TypeError:  # mixed label types
        nodes = sorted(graph.nodes, key=str)
    index = {v: i for i, v in enumerate(nodes)}
    out = nx.Graph()
    out.add_nodes_from(range(len(nodes)))
    out.add_edges_from((index[u], index[v]) for u, v in graph.edges if u != v)
    return out


def real_graph(name: str) -> tuple[nx.Graph, np.ndarray | None]:
    """A networkx built-in graph and, where it has them, ground-truth labels (karate: the two clubs)."""
    if name == "karate":
        g = nx.karate_club_graph()
        labels = np.array([g.nodes[v]["club"] == "Officer" for v in sorted(g.nodes)], dtype=np.int64)
        return relabelled(g), labels
    if name == "les_miserables":
        return relabelled(nx.les_miserables_graph()), None
    if name == "florentine_families":
        return relabelled(nx.florentine_families_graph()), None
    raise ValueError(f"unknown real graph {name!r} (have {REAL_GRAPHS})")


def geometric_graph(n: int, mean_degree: float, rng: np.random.Generator) -> tuple[nx.Graph, np.ndarray]:
    """Random geometric graph on n uniform points in [0, 1]^2 with expected mean degree ~ mean_degree."""
    pos = rng.random((n, 2))
    radius = float(np.sqrt(mean_degree / (np.pi * n)))
    g = nx.random_geometric_graph(n, radius, pos={i: tuple(p) for i, p in enumerate(pos)})
    return relabelled(g), pos


def add_shortcuts(graph: nx.Graph, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Add ``count`` edges between uniformly drawn non-adjacent vertex pairs; returns them in order."""
    n = graph.number_of_nodes()
    if count > n * (n - 1) // 2 - graph.number_of_edges():
        raise ValueError(f"cannot add {count} shortcuts to a graph on {n} vertices")
    added = []
    while len(added) < count:
        u, v = (int(i) for i in rng.integers(0, n, size=2))
        if u != v and not graph.has_edge(u, v):
            graph.add_edge(u, v)
            added.append((min(u, v), max(u, v)))
    return added


def smooth_signal(pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A smooth function of position (random phases), centred and scaled to unit variance."""
    phase = rng.random(2) * 2 * np.pi
    f = np.sin(2 * np.pi * pos[:, 0] + phase[0]) + np.cos(2 * np.pi * pos[:, 1] + phase[1])
    return (f - f.mean()) / f.std()


def planted_communities(n_blocks: int, block_size: int, p_in: float, p_out: float,
                        seed: int) -> tuple[nx.Graph, np.ndarray]:
    probs = [[p_in if i == j else p_out for j in range(n_blocks)] for i in range(n_blocks)]
    g = nx.stochastic_block_model([block_size] * n_blocks, probs, seed=seed)
    return relabelled(g), np.repeat(np.arange(n_blocks), block_size)


def random_complex_graph(family: str, n: int, mean_degree: float, rng: np.random.Generator) -> nx.Graph:
    """One random graph of a family for the property checks (geometric, Erdos-Renyi, small-world, blocks)."""
    seed = int(rng.integers(2**31))
    p = min(1.0, mean_degree / max(n - 1, 1))
    if family == "geometric":
        return geometric_graph(n, mean_degree, rng)[0]
    if family == "erdos_renyi":
        return relabelled(nx.gnp_random_graph(n, p, seed=seed))
    if family == "small_world":
        return relabelled(nx.watts_strogatz_graph(n, max(2, int(round(mean_degree))), 0.1, seed=seed))
    if family == "blocks":
        return planted_communities(2, n // 2, min(1.0, 2 * p), p / 4, seed)[0]
    raise ValueError(f"unknown random graph family {family!r}")
