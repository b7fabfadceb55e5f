"""Graph-alignment pairs: a base graph, a corrupted copy with about the same density, and the node map.

Base graphs come from Erdos-Renyi generators (p = degree / (n - 1)) or from connected BFS subgraphs
of the real graphs networkx ships (karate club, Les Miserables, Davis southern women, Florentine
families). Training and test pairs never share a real node: each real graph's nodes are split into
a train part and a test part (``split_real``), and a subgraph is grown inside one part only; every
real pair records its origin (graph index, original node ids) so the split can be audited. The
corruption removes each edge with probability ``noise`` and adds each non-edge with
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


def split_real(graphs: list[nx.Graph], rng: np.random.Generator, attempts: int = 16) -> dict[str, list]:
    """Per real graph, two node-disjoint connected halves: one for training pairs, one for test pairs.

    Two regions grow breadth-first, one node at a time in turn, from a random node and a node farthest
    from it; a node joins the region that reaches it first, so both regions stay connected (a plain
    BFS ball as test part leaves a train remainder in fragments). Of ``attempts`` such splits the most
    balanced is kept; which region is the test part is a coin flip. Returns {"train": [...], "test":
    [...]}, each a list of (graph index, induced subgraph with the original node labels). Nodes no
    region reaches (other components) are left out.
    """
    parts = {"train": [], "test": []}
    for gi, g in enumerate(graphs):
        regions = min((_two_regions(g, rng) for _ in range(attempts)), key=lambda r: abs(len(r[0]) - len(r[1])))
        test = int(rng.integers(2))
        parts["test"].append((gi, g.subgraph(regions[test]).copy()))
        parts["train"].append((gi, g.subgraph(regions[1 - test]).copy()))
    return parts


def _two_regions(g: nx.Graph, rng: np.random.Generator) -> list[list[int]]:
    a = int(rng.integers(g.number_of_nodes()))
    dist = nx.single_source_shortest_path_length(g, a)
    farthest = sorted(v for v, d in dist.items() if d == max(dist.values()))
    b = int(farthest[int(rng.integers(len(farthest)))])
    if b == a:  # an isolated start node: everything else is out of reach
        return [[a], []]
    regions, owner = [[a], [b]], {a: 0, b: 1}
    frontiers = [[a], [b]]
    turn = 0
    while any(frontiers):
        f = frontiers[turn]
        while f:  # the next node this region takes: an unowned neighbour of its oldest frontier node
            free = sorted(set(g.neighbors(f[0])) - owner.keys())
            if free:
                v = int(free[int(rng.integers(len(free)))])
                owner[v] = turn
                regions[turn].append(v)
                f.append(v)
                break
            f.pop(0)
        turn = 1 - turn
    return regions


def _bfs_nodes(g: nx.Graph, start: int, n: int, rng: np.random.Generator) -> list[int]:
    """Up to ``n`` nodes reached breadth-first from ``start`` (neighbours in random order)."""
    seen, frontier, member = [start], [start], {start}
    while frontier and len(seen) < n:
        nxt = []
        for u in frontier:
            for v in rng.permutation(sorted(set(g.neighbors(u)) - member)).tolist():
                if len(seen) < n and v not in member:
                    seen.append(int(v))
                    member.add(int(v))
                    nxt.append(int(v))
        frontier = nxt
    return seen


def bfs_subgraph(part: list, n: int, rng: np.random.Generator) -> tuple[np.ndarray, int, int, np.ndarray]:
    """A connected ``n``-node subgraph grown breadth-first inside one part of the real graphs.

    ``part``: (graph index, graph) as ``split_real`` gives (a plain list of graphs is read as one part
    holding all of them). The start node lies in a connected component of at least ``n`` nodes, so the
    subgraph has exactly ``n`` nodes. Returns edges (relabelled 0..n-1), n, the graph index and the
    original node labels (``nodes[i]`` is new node i).
    """
    part = [x if isinstance(x, tuple) else (i, x) for i, x in enumerate(part)]
    big = [(gi, c) for gi, g in part for c in nx.connected_components(g) if len(c) >= n]
    if not big:
        largest = max((len(c) for _, g in part for c in nx.connected_components(g)), default=0)
        raise ValueError(f"no connected piece of the real graphs has {n} nodes (largest: {largest})")
    graph_ids = sorted({gi for gi, _ in big})
    gi = graph_ids[int(rng.integers(len(graph_ids)))]  # each graph equally likely, then a component
    comps = [sorted(c) for g_, c in big if g_ == gi]
    comp = comps[int(rng.integers(len(comps)))]
    g = dict(part)[gi]
    seen = _bfs_nodes(g, int(comp[int(rng.integers(len(comp)))]), n, rng)
    mapping = {v: i for i, v in enumerate(seen)}
    sub = nx.relabel_nodes(g.subgraph(seen), mapping)
    return edges_of(sub), len(seen), gi, np.array(seen, dtype=np.int64)


def base_graph(source: str, n: int, degree: float, rng: np.random.Generator, real=None) -> dict:
    """Edges and node count of one base graph; real pairs also carry ``graph`` and ``nodes`` (origin)."""
    if source == "er":
        return {"base": er_graph(n, degree, rng), "n": n}
    if source == "real":
        edges, n, gi, nodes = bfs_subgraph(real if real is not None else real_graphs(), n, rng)
        return {"base": edges, "n": n, "graph": gi, "nodes": nodes}
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
    """A base graph, its corrupted shuffled copy and ``perm``; ``real``: the part of the real graphs to
    draw from (``split_real``), all of them when None."""
    pair = base_graph(source, n, degree, rng, real)
    pair["corrupted"], pair["perm"] = permute(corrupt(pair["base"], pair["n"], noise, rng), pair["n"], rng)
    return pair


def adjacency(edges: np.ndarray, n: int) -> np.ndarray:
    a = np.zeros((n, n), dtype=bool)
    a[edges[0], edges[1]] = a[edges[1], edges[0]] = True
    return a


def wl_colours(edges: np.ndarray, n: int) -> np.ndarray:
    """Stable 1-WL colour refinement of a graph (start: one colour; each round a node's colour becomes
    (its colour, the multiset of its neighbours' colours), relabelled 0..k-1) until the partition stops
    refining. Nodes of one final colour get the same embedding from every model of the zoo (all are
    bounded by 1-WL with all-ones or degree inputs), so they cannot be told apart."""
    nbrs = [[] for _ in range(n)]
    for u, v in np.asarray(edges).T.tolist():
        nbrs[u].append(v)
        nbrs[v].append(u)
    col = [0] * n
    for _ in range(n + 1):
        sig = [(col[v], tuple(sorted(col[u] for u in nbrs[v]))) for v in range(n)]
        relabel = {s: i for i, s in enumerate(sorted(set(sig)))}
        new = [relabel[s] for s in sig]
        if len(relabel) == len(set(col)):
            break
        col = new
    return np.array(col, dtype=np.int64)


def wl_topk_ceiling(edges: np.ndarray, n: int, k: int) -> float:
    """Upper bound on the top-k recall of any 1-WL-bounded siamese model on a pair with this base graph:
    base nodes of one WL colour get identical similarity rows, hence one top-k set, which holds at most
    k of their (distinct) partners. sum over colour classes of min(class size, k), over n."""
    sizes = np.bincount(wl_colours(edges, n))
    return float(np.minimum(sizes[sizes > 0], k).sum() / n)


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
