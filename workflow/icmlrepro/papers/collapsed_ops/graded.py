"""The graded Laplacian L* over the whole cochain space, and its vertex / higher-order partition.

The paper gives L* as a symmetric block-tridiagonal operator whose diagonal blocks are weighted
rank-wise Hodge Laplacians and whose off-diagonal blocks couple adjacent ranks through the
boundary maps, with the coupling weights chosen so that L* is positive semi-definite; the exact
weights are not stated. Our choice makes PSD hold by construction:

    L* = sum_k alpha_k L_k  (block diagonal)  +  sum_{k>=1} beta_k G_k G_k^T
         + sum_{k>=1} mu_k diag(number of (k+1)-cofaces of each k-cell),
    G_k = [B_k ; I_{n_k}] placed on the rows of ranks k-1 and k.

Each term is PSD (a weighted Laplacian, a Gram matrix, a non-negative diagonal), so L* is.
Written out in blocks:

    (0, 0)      alpha_0 L_0 + beta_1 B_1 B_1^T
    (k, k)      alpha_k L_k + beta_k I + beta_{k+1} B_{k+1} B_{k+1}^T + mu_k diag(cofaces_k)   (k >= 1)
    (k-1, k)    beta_k B_k

i.e. block-tridiagonal with coupling through B_k. With alpha_0 = 1 - beta_1 the vertex block is
exactly the graph Laplacian, A = L_0, so the collapsed operator is comparable with L_0 on the
same scale. beta_k > 0 for every k makes the higher-order block C positive definite; beta_k = 0
leaves it singular on the harmonic cochains (homology), which S_eps's epsilon takes care of.

Why the cell mass: with scalar weights per rank only (mu = 0) every block is built from B_k,
B_k^T and multiples of I, and since B_1 B_2 = 0 each plane span{u, B_1^T u} (u an eigenvector of
L_0) is invariant under L*. The Schur complement is then a spectral function of L_0 alone:
triangles and higher cells change nothing. A cell-dependent diagonal breaks that symmetry; the
coface count (edges on many triangles are stiffer) is the simplest one the complex itself
provides. The isotropic operator (mu = 0) is kept as an ablation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .complexes import CliqueComplex


@dataclass(frozen=True)
class CouplingWeights:
    """beta_k couples ranks k-1 and k; alpha_k weighs the Hodge Laplacian of rank k >= 1.

    alpha_0 = 1 - beta_1 is implied (the vertex block is then L_0 itself).
    """

    coupling: tuple[float, ...]  # beta_1, beta_2, ...
    hodge: tuple[float, ...]  # alpha_1, alpha_2, ...
    cell_mass: tuple[float, ...] = ()  # mu_1, mu_2, ... (empty: no topological mass)

    def __post_init__(self) -> None:
        if not self.coupling or not 0.0 < self.coupling[0] <= 1.0:
            raise ValueError(f"beta_1 must be in (0, 1] (alpha_0 = 1 - beta_1 >= 0), got {self.coupling}")
        if any(b < 0 for b in self.coupling) or any(a < 0 for a in self.hodge) or any(m < 0 for m in self.cell_mass):
            raise ValueError("coupling and Hodge weights must be non-negative (else L* may be indefinite)")
        if len(self.hodge) != len(self.coupling):
            raise ValueError("give one Hodge weight per coupled rank: len(hodge) == len(coupling)")
        if self.cell_mass and len(self.cell_mass) != len(self.coupling):
            raise ValueError("give one cell-mass weight per coupled rank: len(cell_mass) == len(coupling)")

    @classmethod
    def from_settings(cls, p) -> "CouplingWeights":
        return cls(tuple(float(b) for b in p["coupling_weights"]), tuple(float(a) for a in p["hodge_weights"]),
                   tuple(float(m) for m in p["cell_mass"]))

    def alpha(self, k: int) -> float:
        return 1.0 - self.coupling[0] if k == 0 else self.hodge[k - 1]

    def beta(self, k: int) -> float:
        return self.coupling[k - 1]

    def mu(self, k: int) -> float:
        return self.cell_mass[k - 1] if self.cell_mass else 0.0

    def with_cell_mass(self, scale: float) -> "CouplingWeights":
        """The same weights with every cell mass times ``scale`` (0: the isotropic operator)."""
        return CouplingWeights(self.coupling, self.hodge, tuple(scale * m for m in self.cell_mass))


@dataclass
class GradedLaplacian:
    """L* as a sparse matrix over the cochains of ranks 0..K, ordered by rank, and its blocks."""

    matrix: sp.csr_matrix
    offsets: np.ndarray  # offsets[k]: first row of rank k; offsets[-1] = total size
    n_vertices: int

    @property
    def a(self) -> sp.csr_matrix:
        """Vertex block A."""
        n = self.n_vertices
        return sp.csr_matrix(self.matrix[:n, :n])

    @property
    def x(self) -> sp.csr_matrix:
        """Coupling X of the vertices to every higher-order cell."""
        n = self.n_vertices
        return sp.csr_matrix(self.matrix[:n, n:])

    @property
    def c(self) -> sp.csr_matrix:
        """Block C of all cells of rank >= 1."""
        n = self.n_vertices
        return sp.csr_matrix(self.matrix[n:, n:])


def cofaces(cx: CliqueComplex, k: int) -> np.ndarray:
    """Number of (k+1)-cells having each k-cell as a face (e.g. triangles on each edge)."""
    if k + 1 > cx.max_rank:
        return np.zeros(cx.size(k))
    return np.asarray(abs(cx.boundary(k + 1)).sum(axis=1)).ravel()


def graded_laplacian(cx: CliqueComplex, weights: CouplingWeights) -> GradedLaplacian:
    top = cx.max_rank
    if top > len(weights.coupling):
        raise ValueError(f"complex has rank {top} cells but only {len(weights.coupling)} coupling weights")
    sizes = [cx.size(k) for k in range(top + 1)]
    blocks: list[list[sp.spmatrix | None]] = [[None] * (top + 1) for _ in range(top + 1)]
    for k in range(top + 1):
        diag = weights.alpha(k) * cx.hodge_laplacian(k)
        if k >= 1:
            diag = diag + weights.beta(k) * sp.identity(sizes[k], format="csr")
        if k + 1 <= top:
            b = cx.boundary(k + 1)
            diag = diag + weights.beta(k + 1) * (b @ b.T)
            if k >= 1 and weights.mu(k):
                diag = diag + weights.mu(k) * sp.diags(cofaces(cx, k))
        blocks[k][k] = sp.csr_matrix(diag)
        if k >= 1:
            b = weights.beta(k) * cx.boundary(k)
            blocks[k - 1][k] = b
            blocks[k][k - 1] = b.T
    for k in range(top + 1):  # empty placeholders keep bmat's shapes explicit
        for j in range(top + 1):
            if blocks[k][j] is None:
                blocks[k][j] = sp.csr_matrix((sizes[k], sizes[j]))
    matrix = sp.csr_matrix(sp.bmat(blocks, format="csr"))
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    return GradedLaplacian(matrix, np.concatenate([[0], np.cumsum(sizes)]), cx.n_vertices)
