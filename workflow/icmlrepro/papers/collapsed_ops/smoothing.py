"""Tikhonov smoothing of a noisy smooth signal on a random geometric graph, with and without shortcuts.

The estimate is argmin_x |x - y|^2 + tau x^T M x = (I + tau M)^-1 y for each vertex operator M
(normalised to lambda_max = 1 so one tau grid fits all). Every operator gets the same tuning
budget: its own weight grid (same length for L0's regulariser, L^mult's gamma and S's Hodge
factor) times the same tau grid, scored on validation noise draws (the untuned L0, r = 0 at its
best tau, is reported beside it); the chosen (weight, tau) is then scored on fresh test draws. Validation
uses the exact eigendecomposition of the dense operator; the test estimates are solved
matrix-free by conjugate gradients (S through its lifted graded system, never formed), and the
dense solution is kept beside them as the cross-check.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import write_parquet
from icmlrepro.core.seeding import derive_seed

from .collapsed import tikhonov_collapsed, tikhonov_sparse
from .data import Graphs
from .operators import OPERATORS, UNTUNED, build, complex_of, grid

VARIANTS = ("no_shortcuts", "shortcuts")


def tau_grid(p) -> np.ndarray:
    lo, hi = p["smoothing"]["tau_range"]
    return np.geomspace(float(lo), float(hi), int(p["smoothing"]["n_tau"]))


def noise(seed: int, split: str, n: int, draws: int, sigma: float) -> np.ndarray:
    """Noise draws shared by both variants of a seed (paired comparison)."""
    rng = np.random.default_rng(derive_seed(seed, "collapsed_ops", "noise", split))
    return sigma * rng.standard_normal((n, draws))


def eig_smooth(lam: np.ndarray, u: np.ndarray, tau: float, y: np.ndarray) -> np.ndarray:
    return u @ ((u.T @ y) / (1.0 + tau * lam)[:, None])


def matrix_free_smooth(built, lmax: float, tau: float, y: np.ndarray, p) -> tuple[np.ndarray, int]:
    rtol = float(p["cg_rtol"])
    cols, its = [], 0
    for j in range(y.shape[1]):
        if built.graded is not None:
            x, it = tikhonov_collapsed(built.graded, float(p["eps"]), tau / lmax, y[:, j], rtol=rtol)
        else:
            x, it = tikhonov_sparse(built.sparse / lmax, tau, y[:, j], rtol=rtol)
        cols.append(x)
        its += it
    return np.column_stack(cols), its


def smooth_graph(graphs: Graphs, gid: str, seed: int, variant: str, p) -> tuple[list[dict], list[dict]]:
    return smooth_signal_on(graphs.graph(gid), graphs.nodes(gid)["signal"].to_numpy(),
                            int(graphs.meta.loc[gid, "max_rank"]), seed, variant, p)


def smooth_signal_on(graph, f: np.ndarray, max_rank: int, seed: int, variant: str,
                     p) -> tuple[list[dict], list[dict]]:
    """Every operator tuned on validation noise draws of ``f`` and scored on fresh test draws."""
    q = p["smoothing"]
    n = f.size
    cx = complex_of(graph, max_rank)
    y_val = f[:, None] + noise(seed, "val", n, int(q["n_val"]), float(q["noise"]))
    y_test = f[:, None] + noise(seed, "test", n, int(q["n_test"]), float(q["noise"]))
    taus = tau_grid(p)
    curve, chosen = [], []
    base = {"seed": seed, "variant": variant, "n_vertices": n, "n_edges": graph.number_of_edges(),
            "n_triangles": cx.size(2)}
    for name in OPERATORS:
        best, untuned = None, None  # untuned: L0 at r = 0 (its best tau), reported as l0_untuned
        for param in grid(p, name):
            built = build(name, graph, cx, p, param)
            lam, u = np.linalg.eigh(built.dense)
            lmax = float(lam[-1])
            lam = np.clip(lam, 0.0, None) / lmax
            for tau in taus:
                mse = float(np.mean((eig_smooth(lam, u, tau, y_val) - f[:, None]) ** 2))
                curve.append({**base, "operator": name, "param": param, "tau": float(tau), "val_mse": mse})
                pick = (mse, param, float(tau), built, lam, u, lmax)
                if best is None or mse < best[0]:
                    best = pick
                if name == "l0" and param == UNTUNED["l0"] and (untuned is None or mse < untuned[0]):
                    untuned = pick
        for label, choice in ((name, best), ("l0_untuned", untuned)):
            if choice is None:
                continue
            val_mse, param, tau, built, lam, u, lmax = choice
            x_cg, its = matrix_free_smooth(built, lmax, tau, y_test, p)
            x_dense = eig_smooth(lam, u, tau, y_test)
            chosen.append({**base, "operator": label, "param": param, "tau": tau, "val_mse": val_mse,
                           "test_mse": float(np.mean((x_cg - f[:, None]) ** 2)),
                           "test_mse_dense": float(np.mean((x_dense - f[:, None]) ** 2)),
                           "cg_vs_dense_max": float(np.abs(x_cg - x_dense).max()),
                           "cg_iterations": its / y_test.shape[1]})
    chosen.append({**base, "operator": "noisy_input", "param": np.nan, "tau": 0.0, "val_mse": np.nan,
                   "test_mse": float(np.mean((y_test - f[:, None]) ** 2)), "test_mse_dense": np.nan,
                   "cg_vs_dense_max": np.nan, "cg_iterations": np.nan})
    return curve, chosen


def run(job) -> None:
    p = job.params
    graphs = Graphs(job.input.graphs, job.input.edges, job.input.nodes)
    curves, chosen = [], []
    for seed in (int(s) for s in p["seeds"]):
        for variant in VARIANTS:
            c, ch = smooth_graph(graphs, f"smoothing/s{seed}/{variant}", seed, variant, p)
            curves += c
            chosen += ch
    write_parquet(job.output.validation, pd.DataFrame(curves))
    write_parquet(job.output.smoothing, pd.DataFrame(chosen))
