"""Baseline vertex operators: the graph Laplacian L0 and the multi-order Laplacian L^mult.

L^mult (Lucas, Cencetti & Battiston, Phys. Rev. Research 2, 033410, 2020) is the ad-hoc way to
fuse ranks back onto vertices that the paper's abstract contrasts with: for each order d it
builds the generalised Laplacian L^(d) = d K^(d) - A^(d), with K^(d)_i the number of
d-simplices containing vertex i and A^(d)_ij the number containing both i and j, and sums them
with weights gamma_d / <K^(d)> (mean generalised degree). L^(1) is L0.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .complexes import CliqueComplex


def order_laplacian(cx: CliqueComplex, d: int) -> sp.csr_matrix:
    """L^(d) = d K^(d) - A^(d) from the d-simplices (d = 1: the graph Laplacian)."""
    n = cx.n_vertices
    cells = np.asarray(cx.simplices[d], dtype=np.int64).reshape(-1, d + 1)
    rows, cols = [], []
    for i in range(d + 1):
        for j in range(d + 1):
            if i != j:
                rows.append(cells[:, i])
                cols.append(cells[:, j])
    adj = sp.csr_matrix((np.ones(sum(r.size for r in rows)), (np.concatenate(rows), np.concatenate(cols))),
                        shape=(n, n)) if rows else sp.csr_matrix((n, n))
    degree = np.bincount(cells.ravel(), minlength=n).astype(float)
    return sp.csr_matrix(d * sp.diags(degree) - adj)


def multiorder_laplacian(cx: CliqueComplex, gammas) -> sp.csr_matrix:
    """sum_d gamma_d / <K^(d)> L^(d) over the orders d = 1..max rank present in the complex."""
    n = cx.n_vertices
    out = sp.csr_matrix((n, n))
    for d in range(1, cx.max_rank + 1):
        if d > len(gammas) or not cx.simplices[d]:
            continue
        mean_degree = (d + 1) * len(cx.simplices[d]) / n
        out = out + (float(gammas[d - 1]) / mean_degree) * order_laplacian(cx, d)
    return sp.csr_matrix(out)
