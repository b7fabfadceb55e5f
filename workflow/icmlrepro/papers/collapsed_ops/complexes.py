"""Clique (flag) complexes of graphs: oriented simplices, boundary maps and Hodge Laplacians.

A k-simplex is a (k+1)-clique of the graph, stored as its sorted vertex tuple; the sorted order
fixes the orientation. The boundary map B_k sends rank-k cells to rank-(k-1) cells with
B_k[face_i(s), s] = (-1)^i, where face_i drops the i-th vertex, so that B_{k-1} B_k = 0.
The rank-k Hodge Laplacian is L_k = B_k^T B_k + B_{k+1} B_{k+1}^T (B_0 = 0, and B_{K+1} = 0 at
the top rank K of a truncated complex); L_0 = B_1 B_1^T is the graph Laplacian.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import scipy.sparse as sp


@dataclass
class CliqueComplex:
    """Simplices of every rank 0..max_rank, and the boundary maps between adjacent ranks."""

    n_vertices: int
    simplices: list[list[tuple[int, ...]]]  # simplices[k]: the k-simplices, sorted
    boundaries: list[sp.csr_matrix] = field(default_factory=list)  # boundaries[k-1] = B_k

    @property
    def max_rank(self) -> int:
        return len(self.simplices) - 1

    def size(self, k: int) -> int:
        return len(self.simplices[k]) if k <= self.max_rank else 0

    def boundary(self, k: int) -> sp.csr_matrix:
        """B_k: rank-k cells -> rank-(k-1) cells (n_{k-1} x n_k)."""
        if not 1 <= k <= self.max_rank:
            raise ValueError(f"no boundary map B_{k} in a complex of max rank {self.max_rank}")
        return self.boundaries[k - 1]

    def hodge_laplacian(self, k: int) -> sp.csr_matrix:
        n = self.size(k)
        lap = sp.csr_matrix((n, n))
        if k >= 1:
            b = self.boundary(k)
            lap = lap + (b.T @ b)
        if k + 1 <= self.max_rank:
            b = self.boundary(k + 1)
            lap = lap + (b @ b.T)
        return sp.csr_matrix(lap)


def boundary_matrix(faces: list[tuple[int, ...]], cells: list[tuple[int, ...]]) -> sp.csr_matrix:
    """Signed incidence of oriented cells on their faces: entry (-1)^i for the face without vertex i."""
    index = {f: i for i, f in enumerate(faces)}
    rows, cols, vals = [], [], []
    for j, cell in enumerate(cells):
        for i in range(len(cell)):
            rows.append(index[cell[:i] + cell[i + 1:]])
            cols.append(j)
            vals.append(-1.0 if i % 2 else 1.0)
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(faces), len(cells)))


def clique_complex(graph: nx.Graph, max_rank: int = 2) -> CliqueComplex:
    """The clique complex of ``graph`` truncated at rank ``max_rank`` (2: triangles, 3: tetrahedra).

    Vertices must be the integers 0..n-1. Cliques are enumerated by networkx in order of size,
    so the enumeration stops at the first clique larger than needed.
    """
    n = graph.number_of_nodes()
    if sorted(graph.nodes) != list(range(n)):
        raise ValueError("clique_complex expects vertices labelled 0..n-1 (nx.convert_node_labels_to_integers)")
    simplices: list[list[tuple[int, ...]]] = [[(v,) for v in range(n)]] + [[] for _ in range(max_rank)]
    for clique in nx.enumerate_all_cliques(graph):
        if len(clique) == 1:
            continue
        if len(clique) > max_rank + 1:
            break
        simplices[len(clique) - 1].append(tuple(sorted(clique)))
    for k in range(1, max_rank + 1):
        simplices[k].sort()
    while len(simplices) > 1 and not simplices[-1]:  # no cells of that rank: the complex is lower
        simplices.pop()
    boundaries = [boundary_matrix(simplices[k - 1], simplices[k]) for k in range(1, len(simplices))]
    return CliqueComplex(n, simplices, boundaries)


def graph_laplacian(graph: nx.Graph) -> sp.csr_matrix:
    """L0 = D - W of an unweighted graph (equals B_1 B_1^T of its complex)."""
    return sp.csr_matrix(nx.laplacian_matrix(graph, nodelist=range(graph.number_of_nodes())).astype(float))
