"""Figures: the spectral bound and energies, what S does to shortcut edges, smoothing, clustering, PE.

Every panel shows all seeds (dots) around their mean, so the spread behind each verdict is visible.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

from .data import Graphs
from .encodings import ENCODINGS
from .encodings import LABELS as PE_LABELS
from .operators import LABELS, OPERATORS, build, complex_of
from .smoothing import VARIANTS

COLORS = {"l0": "tab:blue", "mult": "tab:orange", "collapsed": "tab:green", "isotropic": "tab:gray",
          "noisy_input": "tab:red", "nope": "tab:gray", "laplacepe": "tab:blue", "schurpe": "tab:green"}


def _dots(ax, groups: list[tuple[str, np.ndarray]], ylabel: str, labels: dict) -> None:
    for i, (key, vals) in enumerate(groups):
        vals = np.asarray(vals, dtype=float)
        ax.bar(i, np.nanmean(vals), color=COLORS.get(key, "tab:purple"), alpha=0.35, width=0.7)
        ax.plot(np.full(vals.size, i) + np.linspace(-0.15, 0.15, vals.size), vals, "o", ms=3,
                color=COLORS.get(key, "tab:purple"))
    ax.set_xticks(range(len(groups)), [labels.get(k, k) for k, _ in groups], rotation=20, fontsize=7)
    ax.set_ylabel(ylabel)


def plot_spectra(props: pd.DataFrame, path) -> None:
    fig, axes = new_figure(ncols=2)
    ax = axes[0]
    for fam, d in props.groupby("family"):
        ax.plot(d.lambda_max_l0, d.lambda_max_collapsed, "o", ms=3, label=fam, alpha=0.7)
    hi = float(props.lambda_max_l0.max()) * 1.05
    ax.plot([0, hi], [0, hi], "k--", lw=1, label="y = x")
    ax.set(xlabel=r"$\lambda_{max}(L_0)$", ylabel=r"$\lambda_{max}(S_\epsilon)$",
           title="spectral upper bound, every complex")
    ax.legend(fontsize=6)
    ax = axes[1]
    density = props.n_cells_2 / props.n_vertices
    ax.plot(density, 1 + props.energy_rel_collapsed_minus_l0, "o", ms=3, alpha=0.7)
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.set(xlabel="triangles per vertex", ylabel=r"mean $x^T S x / x^T L_0 x$ (random x)",
           title="Dirichlet energy relative to $L_0$")
    save(fig, path)


def plot_operator(graphs: Graphs, p, path) -> None:
    """On the first seed's geometric graph with shortcuts: |S_ij| by hop distance, and S's edge
    weights -S_ij on shortcut edges vs the rest (L0 gives every edge weight 1)."""
    seed = int(p["seeds"][0])
    gid = f"smoothing/s{seed}/shortcuts"
    graph = graphs.graph(gid)
    cx = complex_of(graph, int(graphs.meta.loc[gid, "max_rank"]))
    fig, axes = new_figure(ncols=2)
    dist = dict(nx.all_pairs_shortest_path_length(graph, cutoff=8))
    edges = graphs.edges(gid)
    for name in ("collapsed", "isotropic"):
        s = build(name, graph, cx, p).dense
        scale = np.abs(s).max()
        by_hop = {}
        for i, row in dist.items():
            for j, h in row.items():
                if j > i:
                    by_hop.setdefault(h, []).append(abs(s[i, j]) / scale)
        hops = sorted(by_hop)
        axes[0].semilogy(hops, [np.mean(by_hop[h]) for h in hops], "o-", color=COLORS[name], label=LABELS[name])
        w = -s[edges.u.to_numpy(), edges.v.to_numpy()]
        short = edges.shortcut.to_numpy()
        axes[1].hist(w[~short], bins=40, alpha=0.5, density=True, color=COLORS[name],
                     label=f"{LABELS[name]}: local edges")
        axes[1].hist(w[short], bins=40, alpha=0.9, density=True, histtype="step", lw=1.5, color=COLORS[name],
                     label=f"{LABELS[name]}: shortcuts")
    axes[0].set(xlabel="hop distance", ylabel=r"mean $|S_{ij}| / \max|S|$", title="long-range coupling")
    axes[0].legend(fontsize=7)
    axes[1].set(xlabel=r"edge weight $-S_{ij}$ ($L_0$: 1)", ylabel="density", title="shortcut vs local edges")
    axes[1].legend(fontsize=6)
    save(fig, path)


def plot_smoothing(sm: pd.DataFrame, val: pd.DataFrame, path) -> None:
    fig, axes = new_figure(ncols=3, width=3.6)
    for ax, variant in zip(axes[:2], VARIANTS):
        d = sm[sm.variant == variant]
        groups = [(op, d[d.operator == op].sort_values("seed").test_mse.to_numpy())
                  for op in (*OPERATORS, "noisy_input")]
        _dots(ax, groups, "test MSE", {**LABELS, "noisy_input": "noisy input"})
        ax.set_title(variant.replace("_", " "), fontsize=9)
        ax.set_yscale("log")
    ax = axes[2]
    d = val[val.variant == "shortcuts"]
    chosen = sm[sm.variant == "shortcuts"]
    for op in OPERATORS:
        params = chosen[chosen.operator == op].param
        best = params.mode().iloc[0]  # the weight chosen most often over seeds
        c = d[(d.operator == op) & (d.param == best)].groupby("tau").val_mse.mean()
        ax.loglog(c.index, c.values, color=COLORS[op], label=f"{LABELS[op]} (weight {best:g})")
    ax.set(xlabel=r"$\tau$ ($\lambda_{max}$ = 1)", ylabel="validation MSE", title="shortcuts: MSE vs tau")
    ax.legend(fontsize=6)
    save(fig, path)


def plot_clustering(clus: pd.DataFrame, path) -> None:
    fig, axes = new_figure(ncols=2)
    for ax, (split, title) in zip(axes, (("test", "planted communities"), ("real", "karate club"))):
        d = clus[clus.split == split]
        groups = [(op, d[d.operator == op].groupby("seed").ari.mean().to_numpy()) for op in OPERATORS]
        _dots(ax, groups, "adjusted Rand index", LABELS)
        ax.set_title(title, fontsize=9)
    save(fig, path)


def plot_encodings(res: pd.DataFrame, curves: pd.DataFrame, path) -> None:
    fig, axes = new_figure(ncols=2)
    groups = [(e, res[res.encoding == e].sort_values("seed").test_acc.to_numpy()) for e in ENCODINGS]
    _dots(axes[0], groups, "test accuracy", PE_LABELS)
    axes[0].set_title("GCN, distance-from-centre classes", fontsize=9)
    chosen = curves.merge(res[["seed", "encoding", "weight_decay"]], on=["seed", "encoding", "weight_decay"])
    for e in ENCODINGS:  # each seed's curve at its chosen weight decay
        c = chosen[chosen.encoding == e].groupby("epoch").val_acc.mean()
        axes[1].plot(c.index, c.values, color=COLORS[e], label=PE_LABELS[e])
    axes[1].set(xlabel="epoch", ylabel="validation accuracy (mean over seeds)", title="training")
    axes[1].legend(fontsize=7)
    save(fig, path)


def run(job) -> None:
    p = job.params
    i, o = job.input, job.output
    plot_spectra(read_parquet(i.properties), o.spectra)
    plot_operator(Graphs(i.graphs, i.edges, i.nodes), p, o.operator)
    plot_smoothing(read_parquet(i.smoothing), read_parquet(i.validation), o.smoothing)
    plot_clustering(read_parquet(i.clustering), o.clustering)
    res = pd.concat([read_parquet(i[f"results_{e}"]) for e in ENCODINGS], ignore_index=True)
    curves = pd.concat([read_parquet(i[f"curves_{e}"]) for e in ENCODINGS], ignore_index=True)
    plot_encodings(res, curves, o.encodings)
