"""Positional encodings for a GNN: none, Laplacian eigenvectors, eigenvectors of the collapsed S.

LaplacePE takes the eigenvectors of the k smallest non-trivial eigenvalues of the normalised
graph Laplacian; SchurPE the same of the normalised collapsed operator S_eps (same
normalisation rule, same k), so the two differ only in the operator. Eigenvector signs are
arbitrary, so training flips them at random (the usual LapPE augmentation).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from .operators import build, complex_of, degree_normalised

ENCODINGS = ("nope", "laplacepe", "schurpe")
OPERATOR_OF = {"laplacepe": "l0", "schurpe": "collapsed"}
LABELS = {"nope": "NoPE", "laplacepe": "LaplacePE", "schurpe": "SchurPE"}


def eigen_encoding(m: np.ndarray, k: int) -> np.ndarray:
    """Eigenvectors 1..k (skipping the smallest) of the degree-normalised operator, signs fixed by
    making the largest-magnitude entry positive (training then flips them at random)."""
    _, vecs = np.linalg.eigh(degree_normalised(m))
    pe = vecs[:, 1:k + 1]
    idx = np.abs(pe).argmax(axis=0)
    return pe * np.sign(pe[idx, np.arange(pe.shape[1])])


def node_features(encoding: str, graph: nx.Graph, max_rank: int, p) -> np.ndarray:
    """Constant input feature, plus the k-dimensional encoding unless ``nope``."""
    n = graph.number_of_nodes()
    ones = np.ones((n, 1))
    if encoding == "nope":
        return ones
    cx = complex_of(graph, max_rank)
    m = build(OPERATOR_OF[encoding], graph, cx, p).dense
    return np.hstack([ones, eigen_encoding(m, int(p["encodings"]["k"]))])
