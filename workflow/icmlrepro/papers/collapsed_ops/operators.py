"""The vertex operators every experiment compares, built the same way from one graph.

``l0``        graph Laplacian (the rank-0 Hodge Laplacian)
``mult``      multi-order Laplacian L^mult with weights (1, gamma, gamma, ...) on orders 1, 2, ...
``collapsed`` S_eps of the graded Laplacian with the configured weights (Hodge weights scaled)
``isotropic`` S_eps with the cell masses switched off: every block a scalar multiple of identity or
              of a Hodge term, which makes S a spectral function of L0 (the ablation that shows
              what the higher-order cells contribute)

Each takes one scalar ``param`` that the experiments tune on validation data with grids of the
same length (L^mult: gamma; S: the factor on the Hodge weights; L0: a degree regulariser r, the
operator L0 + r <d> I, which under the diagonal normalisation of spectral clustering is the
regularised normalised Laplacian I - D_t^-1/2 A D_t^-1/2 with D_t = D + r <d> I (Qin and Rohe, 2013)
and in Tikhonov smoothing adds shrinkage towards 0; r = 0 is the untuned L0, reported beside it).
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


UNTUNED = {"l0": 0.0, "mult": 1.0, "collapsed": 1.0, "isotropic": 1.0}  # the configured operator


def grid(p, name: str) -> list[float]:
    """The tuning grid of an operator family: L^mult's gamma, S's Hodge factor, L0's regulariser r."""
    t = p["tuning"]
    if not len(t["mult_gamma"]) == len(t["hodge_scale"]) == len(t["l0_shift"]):
        raise ValueError("tuning.mult_gamma, tuning.hodge_scale and tuning.l0_shift must have the same "
                         "length (L0, L^mult and S get the same tuning budget)")
    if UNTUNED["l0"] not in [float(r) for r in t["l0_shift"]]:
        raise ValueError("tuning.l0_shift must contain 0 (the untuned L0 is reported beside the tuned one)")
    if name == "mult":
        return [float(g) for g in t["mult_gamma"]]
    if name in ("collapsed", "isotropic"):
        return [float(h) for h in t["hodge_scale"]]
    return [float(r) for r in t["l0_shift"]]


def build(name: str, graph: nx.Graph, cx: CliqueComplex, p, param: float | None = None) -> Built:
    """Operator ``name`` at ``param`` (None: the untuned, configured operator)."""
    param = UNTUNED[name] if param is None else param
    if name == "l0":
        lap = graph_laplacian(graph)
        if param:
            mean_degree = 2.0 * graph.number_of_edges() / max(graph.number_of_nodes(), 1)
            lap = sp.csr_matrix(lap + param * mean_degree * sp.identity(lap.shape[0]))
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
