"""The collapsed operator S_eps = A - X (C + eps I)^-1 X^T, formed densely or applied matrix-free.

S is the Schur complement of the higher-order block C in the graded Laplacian: it is what the
vertices feel once every edge, triangle, ... variable is eliminated. It is generally dense
(C^-1 couples every cell of a connected complex), so beyond small sizes it is applied, never
formed: one matrix-vector product is A v minus X times the solution of (C + eps I) z = X^T v,
found by scipy's (Jacobi-preconditioned) conjugate gradients. The dense form uses a sparse LU
of C + eps I and serves as the small-size cross-check of the matrix-free one.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, cg, eigsh, splu

from .graded import GradedLaplacian


class ConvergenceError(RuntimeError):
    """Conjugate gradients stopped before reaching the requested tolerance."""


def _cg(matrix, rhs: np.ndarray, rtol: float, maxiter: int, precond=None) -> tuple[np.ndarray, int]:
    count = [0]

    def tick(_):
        count[0] += 1

    sol, info = cg(matrix, rhs, rtol=rtol, atol=0.0, maxiter=maxiter, M=precond, callback=tick)
    if info != 0:
        raise ConvergenceError(f"CG did not reach rtol={rtol:g} in {maxiter} iterations (info={info})")
    return sol, count[0]


def _jacobi(matrix: sp.csr_matrix) -> LinearOperator:
    inv = 1.0 / matrix.diagonal()
    return LinearOperator(matrix.shape, matvec=lambda v: inv * np.ravel(v), dtype=float)


def regularised_block(g: GradedLaplacian, eps: float) -> sp.csr_matrix:
    c = g.c
    return sp.csr_matrix(c + eps * sp.identity(c.shape[0], format="csr"))


def collapsed_dense(g: GradedLaplacian, eps: float) -> np.ndarray:
    """S_eps as a dense array (small complexes: cross-check and eigendecompositions)."""
    a, x = g.a.toarray(), g.x
    if x.shape[1] == 0:
        return a
    # C is symmetric: a symmetric fill-reducing ordering is several times faster than COLAMD here
    lu = splu(sp.csc_matrix(regularised_block(g, eps)), permc_spec="MMD_AT_PLUS_A",
              options={"SymmetricMode": True})
    z = lu.solve(np.ascontiguousarray(x.T.toarray()))
    return a - np.asarray(x @ z)


class CollapsedOperator(LinearOperator):
    """S_eps as a scipy LinearOperator: every product solves (C + eps I) z = X^T v by CG.

    ``iterations`` accumulates the inner CG iterations, so callers can report the cost.
    """

    def __init__(self, g: GradedLaplacian, eps: float, rtol: float = 1e-10, maxiter: int = 10_000):
        n = g.n_vertices
        super().__init__(dtype=np.float64, shape=(n, n))
        self._a, self._x = g.a, g.x
        self._c = regularised_block(g, eps)
        self._m = _jacobi(self._c) if self._c.shape[0] else None
        self.rtol, self.maxiter = rtol, maxiter
        self.iterations = 0
        self.products = 0

    def _matvec(self, v):
        v = np.ravel(v).astype(float)
        self.products += 1
        out = self._a @ v
        rhs = self._x.T @ v
        if rhs.size == 0 or not np.any(rhs):
            return out
        z, it = _cg(self._c, rhs, self.rtol, self.maxiter, self._m)
        self.iterations += it
        return out - self._x @ z

    def _rmatvec(self, v):
        return self._matvec(v)  # S is symmetric

    def _matmat(self, v):
        return np.column_stack([self._matvec(col) for col in np.asarray(v).T])


def largest_eigenvalue(op, tol: float = 1e-10) -> float:
    """lambda_max of a symmetric PSD operator (sparse matrix or LinearOperator) by Lanczos."""
    n = op.shape[0]
    if n <= 2:
        return float(np.linalg.eigvalsh(op @ np.eye(n)).max())
    v0 = np.ones(n) / np.sqrt(n) + np.linspace(-1.0, 1.0, n)  # fixed start: deterministic
    return float(eigsh(op, k=1, which="LA", tol=tol, v0=v0, return_eigenvectors=False)[0])


def tikhonov_collapsed(g: GradedLaplacian, eps: float, tau: float, y: np.ndarray,
                       rtol: float = 1e-10, maxiter: int = 10_000) -> tuple[np.ndarray, int]:
    """argmin_x |x - y|^2 + tau x^T S_eps x, matrix-free, with one CG on the lifted system.

    (I + tau S_eps) x = y is the vertex row of
        [[I + tau A, tau X], [tau X^T, tau (C + eps I)]] [x; z] = [y; 0]
    (eliminate z = -(C + eps I)^-1 X^T x). The lifted matrix is sparse and positive definite,
    so a single CG solves it without forming S or nesting solves. Returns x and the CG iterations.
    """
    n = g.n_vertices
    lifted = tau * g.matrix + sp.block_diag(
        [sp.identity(n), tau * eps * sp.identity(g.matrix.shape[0] - n)], format="csr")
    rhs = np.concatenate([y, np.zeros(g.matrix.shape[0] - n)])
    w, it = _cg(sp.csr_matrix(lifted), rhs, rtol, maxiter, _jacobi(sp.csr_matrix(lifted)))
    return w[:n], it


def tikhonov_sparse(op: sp.csr_matrix, tau: float, y: np.ndarray, rtol: float = 1e-10,
                    maxiter: int = 10_000) -> tuple[np.ndarray, int]:
    """argmin_x |x - y|^2 + tau x^T M x for a sparse PSD M (L0, L^mult), by CG."""
    system = sp.csr_matrix(sp.identity(op.shape[0]) + tau * op)
    return _cg(system, y, rtol, maxiter, _jacobi(system))
