"""Graphs that exist offline, and the structural quantities every model reads from them.

* ``contextual_sbm``: a contextual stochastic block model (networkx generator) whose edge
  homophily is set exactly in expectation, with Gaussian class-mean features. It gives the
  homophilic and heterophilic regimes that the paper's benchmarks (Cora..., chameleon, squirrel,
  actor) span, none of which ship offline.
* ``digits_knn``: scikit-learn's handwritten digits (real 8x8 images, real labels) joined by a
  symmetric k-nearest-neighbour graph: real features and labels, a constructed (homophilic) graph.
* ``laplacian_pe``: the k smallest non-trivial eigenvectors of the normalised Laplacian, the
  structural reference of C2-GMAE, with a deterministic sign convention.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.neighbors import kneighbors_graph


def _undirected_edge_index(graph: nx.Graph, n: int) -> np.ndarray:
    """Both directions of every edge, no self loops, sorted, shape (2, 2|E|)."""
    edges = np.array([(u, v) for u, v in graph.edges() if u != v], dtype=np.int64).reshape(-1, 2)
    ei = np.concatenate([edges, edges[:, ::-1]]).T
    order = np.lexsort((ei[1], ei[0]))
    return np.ascontiguousarray(ei[:, order])


def edge_homophily(edge_index: np.ndarray, y: np.ndarray) -> float:
    """Share of edges whose endpoints share a label."""
    return float(np.mean(y[edge_index[0]] == y[edge_index[1]]))


def sbm_probabilities(n: int, n_classes: int, avg_degree: float, homophily: float,
                      paired: bool = False) -> tuple[float, float]:
    """Within- and between-block edge probabilities for balanced blocks such that the expected
    degree is ``avg_degree`` and the expected share of within-class edges is ``homophily``. With
    ``paired`` the between-class edges join each class only to its partner class (0-1, 2-3, ...)."""
    size = n // n_classes
    n_edges = n * avg_degree / 2
    intra_pairs = n_classes * size * (size - 1) / 2
    inter_pairs = size * size * (n_classes // 2 if paired else n_classes * (n_classes - 1) / 2)
    p_in, p_out = homophily * n_edges / intra_pairs, (1 - homophily) * n_edges / inter_pairs
    if p_in > 1 or p_out > 1:
        raise ValueError(f"degree {avg_degree} with homophily {homophily} needs p > 1 (n={n})")
    return p_in, p_out


def partner_of(n_classes: int) -> np.ndarray:
    """The partner class of each class in a paired SBM: 0<->1, 2<->3, ... (an even number of classes)."""
    if n_classes % 2:
        raise ValueError(f"a paired SBM needs an even number of classes, not {n_classes}")
    return np.arange(n_classes) ^ 1


def contextual_sbm(n: int, n_classes: int, n_features: int, avg_degree: float, homophily: float,
                   signal: float, seed: int, paired: bool = False) -> dict:
    """Balanced SBM with class-mean Gaussian features x = signal * mu_y + N(0, I).

    ``paired``: the between-class edges of a class all go to one partner class (``partner_of``), so
    a node's neighbourhood names its class (heterophily with structure that carries label
    information, as in bipartite-like graphs); otherwise they are spread evenly over the other classes."""
    rng = np.random.default_rng(seed)
    size = n // n_classes
    p_in, p_out = sbm_probabilities(n, n_classes, avg_degree, homophily, paired)
    if paired:
        probs = np.eye(n_classes) * p_in
        probs[np.arange(n_classes), partner_of(n_classes)] = p_out
    else:
        probs = np.full((n_classes, n_classes), p_out) + np.eye(n_classes) * (p_in - p_out)
    graph = nx.stochastic_block_model([size] * n_classes, probs.tolist(), seed=int(rng.integers(2**31)))
    y = np.repeat(np.arange(n_classes), size)
    means = rng.normal(size=(n_classes, n_features))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    x = signal * means[y] + rng.normal(size=(size * n_classes, n_features))
    return {"x": x.astype(np.float32), "y": y, "edge_index": _undirected_edge_index(graph, len(y))}


def digits_knn(n: int, k: int, seed: int) -> dict:
    """A class-stratified subsample of scikit-learn digits joined by a symmetric kNN graph."""
    data = load_digits()
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.permutation(len(data.target))[:n])
    x = (data.data[idx] / 16.0).astype(np.float32)
    adj = kneighbors_graph(x, k, include_self=False)
    graph = nx.from_scipy_sparse_array(adj.maximum(adj.T))
    return {"x": x, "y": data.target[idx].astype(np.int64), "edge_index": _undirected_edge_index(graph, n)}


def laplacian_pe(edge_index: np.ndarray, n: int, k: int) -> np.ndarray:
    """Eigenvectors 1..k of L = I - D^-1/2 A D^-1/2 (index 0, the trivial one, dropped), each with
    its largest-magnitude entry made positive so that the PE is a deterministic function of the graph."""
    a = sp.coo_matrix((np.ones(edge_index.shape[1]), (edge_index[0], edge_index[1])), shape=(n, n)).toarray()
    deg = a.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1.0)), 0.0)
    lap = np.eye(n) - inv[:, None] * a * inv[None, :]
    _, vecs = np.linalg.eigh(lap)
    u = vecs[:, 1:k + 1]
    sign = np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
    return (u * np.where(sign == 0, 1.0, sign)).astype(np.float32)
