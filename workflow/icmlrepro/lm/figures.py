"""Stage ``lm.figures``: training curves, and accuracy against the length of the chain of thought."""

from __future__ import annotations

import numpy as np

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_json, read_parquet


def run(job) -> None:
    fig, (ax,) = new_figure()
    for role in ("target", "draft"):
        c = read_json(job.input[f"curve_{role}"])
        if c["curve"]:
            ax.plot([e["step"] for e in c["curve"]], [e["loss"] for e in c["curve"]],
                    label=f"{role} ({c['parameters'] / 1e6:.2f}M params)")
    ax.set(xlabel="step", ylabel="training loss (target tokens)", yscale="log", title="substrate training")
    ax.legend(fontsize=7)
    save(fig, job.output.curve)

    df = read_parquet(job.input.table)
    df = df[df.role == "target"]
    fig, (ax,) = new_figure()
    for fam, d in df.groupby("family"):
        edges = np.unique(np.quantile(d.target_tokens, np.linspace(0, 1, 5)))
        if len(edges) < 2:
            edges = np.array([d.target_tokens.min(), d.target_tokens.max() + 1])
        idx = np.clip(np.digitize(d.target_tokens, edges[1:-1]), 0, len(edges) - 2)
        mids = [(edges[i] + edges[i + 1]) / 2 for i in sorted(set(idx))]
        accs = [d.correct[idx == i].mean() for i in sorted(set(idx))]
        ax.plot(mids, accs, marker="o", label=fam)
    ax.set(xlabel="length of the chain of thought (tokens)", ylabel="exact-answer accuracy",
           ylim=(-0.02, 1.02), title="target model, full attention")
    ax.legend(fontsize=7)
    save(fig, job.output.accuracy)
