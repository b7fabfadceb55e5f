"""Graph-alignment pairs: a base graph, a corrupted copy with about the same density, and the node map.

Base graphs come from Erdos-Renyi generators (p = degree / (n - 1)) or from connected BFS subgraphs
of the real graphs networkx ships (karate club, Les Miserables, Davis southern women, Florentine
families). The corruption removes each edge with probability ``noise`` and adds each non-edge with
probability ``noise * m / (N - m)`` (m edges, N = n(n-1)/2 pairs), so the expected number of edges,
hence the density, is unchanged; ``noise`` is the difficulty. The corrupted copy's nodes are shuffled
so that no model or matcher can profit from the node order: ``perm[i]`` is the corrupted-graph index
of base node ``i``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

SOURCES = ("er", "real")


def real_graphs() -> list[nx.Graph]:
    """The real graphs networkx ships (no download), relabelled to integers, as simple undirected graphs."""
    graphs = [nx.karate_club_graph(), nx.les_miserables_graph(), nx.davis_southern_women_graph(),
              nx.florentine_families_graph()]
    return [nx.convert_node_labels_to_integers(nx.Graph(g)) for g in graphs]


def edges_of(g: nx.Graph) -> np.ndarray:
    """Undirected edge list (2, m) with u < v, sorted, of a graph on nodes 0..n-1."""
    e = np.array(sorted((min(u, v), max(u, v)) for u, v in g.edges() if u != v), dtype=np.int64)
    return e.T.reshape(2, -1)


def er_graph(n: int, degree: float, rng: np.random.Generator) -> np.ndarray:
    g = nx.gnp_random_graph(n, min(1.0, degree / (n - 1)), seed=int(rng.integers(2**31)))
    return edges_of(g)


def bfs_subgraph(graphs: list[nx.Graph], n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A connected subgraph of ``n`` nodes grown breadth-first (random neighbour order) from a random node."""
    big = [g for g in graphs if g.number_of_nodes() >= n]
    if not big:
        raise ValueError(f"no real graph has {n} nodes (largest: {max(g.number_of_nodes() for g in graphs)})")
    g = big[int(rng.integers(len(big)))]
    start = int(rng.integers(g.number_of_nodes()))
    seen, frontier = [start], [start]
    while frontier and len(seen) < n:
        nxt = []
        for u in frontier:
            nb = [v for v in g.neighbors(u) if v not in seen]
            for v in rng.permutation(nb).tolist() if nb else []:
                if len(seen) < n and v not in seen:
                    seen.append(int(v))
                    nxt.append(int(v))
        frontier = nxt
    sub = nx.convert_node_labels_to_integers(g.subgraph(seen).copy())
    return edges_of(sub), sub.number_of_nodes()


def base_graph(source: str, n: int, degree: float, rng: np.random.Generator, real=None) -> tuple[np.ndarray, int]:
    """Edges and node count of one base graph (a BFS subgraph may stop short of ``n`` in a small component)."""
    if source == "er":
        return er_graph(n, degree, rng), n
    if source == "real":
        return bfs_subgraph(real if real is not None else real_graphs(), n, rng)
    raise ValueError(f"unknown graph source {source!r} (known: {', '.join(SOURCES)})")


def corrupt(edges: np.ndarray, n: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """Remove each edge w.p. ``noise``, add each non-edge w.p. noise*m/(N-m): expected edge count kept."""
    m, pairs = edges.shape[1], n * (n - 1) // 2
    adj = np.zeros((n, n), dtype=bool)
    adj[edges[0], edges[1]] = True
    iu = np.triu_indices(n, 1)
    present = adj[iu]
    p_add = noise * m / (pairs - m) if pairs > m else 0.0
    u = rng.random(pairs)
    keep = np.where(present, u >= noise, u < p_add)
    return np.stack([iu[0][keep], iu[1][keep]]).astype(np.int64)


def permute(edges: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Relabel node i as perm[i]; returns the relabelled edges (u < v) and perm."""
    perm = rng.permutation(n).astype(np.int64)
    e = perm[edges]
    return np.sort(e, axis=0), perm


def make_pair(source: str, n: int, degree: float, noise: float, rng: np.random.Generator, real=None) -> dict:
    base, n = base_graph(source, n, degree, rng, real)
    corr, perm = permute(corrupt(base, n, noise, rng), n, rng)
    return {"n": n, "base": base, "corrupted": corr, "perm": perm}


def adjacency(edges: np.ndarray, n: int) -> np.ndarray:
    a = np.zeros((n, n), dtype=bool)
    a[edges[0], edges[1]] = a[edges[1], edges[0]] = True
    return a


REGRESSION_FAMILIES = ("watts_strogatz", "barabasi_albert", "erdos_renyi")


def regression_graph(n: int, degree: float, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """A graph from a random family with a random rewiring/density knob, and its average clustering.

    The target (average clustering coefficient) is a structural quantity no node-wise feature
    gives directly, so a transformer can only predict it well from positional information.
    """
    family = REGRESSION_FAMILIES[int(rng.integers(len(REGRESSION_FAMILIES)))]
    s = int(rng.integers(2**31))
    k = max(2, int(round(degree)))
    if family == "watts_strogatz":
        g = nx.connected_watts_strogatz_graph(n, k + k % 2, float(rng.uniform(0.0, 1.0)), seed=s)
    elif family == "barabasi_albert":
        g = nx.barabasi_albert_graph(n, max(1, k // 2), seed=s)
    else:
        g = nx.gnp_random_graph(n, float(rng.uniform(0.5, 1.5)) * degree / (n - 1), seed=s)
    return edges_of(g), float(nx.average_clustering(g))
