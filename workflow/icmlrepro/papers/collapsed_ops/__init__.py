"""Collapsed Effective Operators: the Schur complement of a graded Laplacian onto the vertices.

Stages (one per Snakemake rule): ``data`` (random geometric, planted-community and real graphs,
geometric graphs with distance-from-centre classes), ``properties`` (PSD, spectral bound, density, energy and the
matrix-free/dense cross-check on many random complexes), ``clustering`` and ``smoothing``
(S against the graph Laplacian L0 and the multi-order Laplacian L^mult), ``train`` (a GCN with
NoPE / LaplacePE / SchurPE), ``evaluate`` (metrics.json), ``figures``.

The operators themselves live in ``complexes`` (clique complex, boundary maps, Hodge
Laplacians), ``graded`` (graded Laplacian and its vertex/higher-order partition),
``collapsed`` (S_eps dense and matrix-free) and ``baselines`` (L^mult).
"""
