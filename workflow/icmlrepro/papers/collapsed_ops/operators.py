"""The vertex operators every experiment compares, built the same way from one graph.

``l0``        graph Laplacian (the rank-0 Hodge Laplacian)
``mult``      multi-order Laplacian L^mult with weights (1, gamma, gamma, ...) on orders 1, 2, ...
``collapsed`` S_eps of the graded Laplacian with the configured weights (Hodge weights scaled)
``isotropic`` S_eps with the cell masses switched off: every block a scalar multiple of identity or
              of a Hodge term, which makes S a spectral function of L0 (the ablation that shows
              what the higher-order cells contribute)

Each takes one scalar ``param`` that the experiments tune on validation data with grids of the
same length (L^mult: gamma; S: the factor on the Hodge weights; L0: none).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import scipy.sparse as sp

from .baselines import multiorder_laplacian
from .collapsed import collapsed_dense
from .complexes import CliqueComplex, clique_complex, graph_laplacian
from .graded import CouplingWeights, GradedLaplacian, graded_laplacian

OPERATORS = ("l0", "mult", "collapsed", "isotropic")
LABELS = {"l0": "graph Laplacian $L_0$", "mult": "multi-order $L^{mult}$",
          "collapsed": "collapsed $S_\\epsilon$", "isotropic": "$S_\\epsilon$, no cell mass"}


def weights_for(p, name: str, param: float = 1.0) -> CouplingWeights:
    """Configured weights with the Hodge weights times ``param``; no cell mass for ``isotropic``."""
    base = CouplingWeights.from_settings(p)
    w = CouplingWeights(base.coupling, tuple(param * a for a in base.hodge), base.cell_mass)
    return w.with_cell_mass(0.0) if name == "isotropic" else w


@dataclass
class Built:
    """One operator on one graph: the dense matrix, plus what the matrix-free path needs."""

    name: str
    param: float
    dense: np.ndarray
    sparse: sp.csr_matrix | None = None  # l0, mult
    graded: GradedLaplacian | None = None  # collapsed, isotropic


def grid(p, name: str) -> list[float]:
    """The tuning grid of an operator family: L^mult's gamma, S's Hodge factor, L0 nothing."""
    t = p["tuning"]
    if len(t["mult_gamma"]) != len(t["hodge_scale"]):
        raise ValueError("tuning.mult_gamma and tuning.hodge_scale must have the same length "
                         "(L^mult and S get the same tuning budget)")
    if name == "mult":
        return [float(g) for g in t["mult_gamma"]]
    if name in ("collapsed", "isotropic"):
        return [float(h) for h in t["hodge_scale"]]
    return [1.0]


def build(name: str, graph: nx.Graph, cx: CliqueComplex, p, param: float = 1.0) -> Built:
    if name == "l0":
        lap = graph_laplacian(graph)
        return Built(name, param, lap.toarray(), sparse=lap)
    if name == "mult":
        lap = multiorder_laplacian(cx, [1.0] + [param] * max(cx.max_rank - 1, 0))
        return Built(name, param, lap.toarray(), sparse=lap)
    if name in ("collapsed", "isotropic"):
        g = graded_laplacian(cx, weights_for(p, name, param))
        s = collapsed_dense(g, float(p["eps"]))
        return Built(name, param, 0.5 * (s + s.T), graded=g)
    raise ValueError(f"unknown operator {name!r} (have {OPERATORS})")


def complex_of(graph: nx.Graph, max_rank: int) -> CliqueComplex:
    return clique_complex(graph, max_rank)


def degree_normalised(m: np.ndarray) -> np.ndarray:
    """D^-1/2 M D^-1/2 with D = diag(M): the normalised Laplacian for M = L0, the same rule for all."""
    d = np.diag(m).copy()
    d[d <= 0] = 1.0
    s = 1.0 / np.sqrt(d)
    return m * s[:, None] * s[None, :]
