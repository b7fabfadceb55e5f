"""PixCLIP figures: every task per arm (all seeds shown), region retrieval per mask shape and long-text retrieval per
caption length, and example test scenes with each mask's retrieved phrase."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, new_grid, save
from icmlrepro.core.io import read_npz, read_parquet

from .data import SHAPES
from .evaluate import RANDOM

LABELS = {RANDOM: "untrained (floor)", "clip": "CLIP-style", "alphaclip": "Alpha-CLIP-style", "pixclip": "PixCLIP",
          "pixclip_no_global": "PixCLIP - global", "pixclip_no_region": "PixCLIP - region",
          "pixclip_no_pixel": "PixCLIP - pixel"}
TASKS = {"region_cls_top1": "region cls\ntop-1 (mpc)", "region_text_r1": "region->text\nR@1",
         "referring_acc": "referring\nacc", "pixel_acc": "pixel\nacc", "long_text_r1": "long-text\nR@1",
         "global_r1": "short-caption\nglobal R@1"}


def _arms(scores: pd.DataFrame) -> list[str]:
    return [a for a in LABELS if a in set(scores["arm"])]


def _bars(ax, scores: pd.DataFrame, keys: dict, arms: list[str]) -> None:
    """Grouped bars (mean over seeds) with every seed as a dot."""
    w = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        x = np.arange(len(keys)) + i * w
        sub = scores[scores["arm"] == arm]
        per = [sub.loc[sub["metric"] == k, "value"].to_numpy() for k in keys]
        ax.bar(x, [v.mean() if len(v) else np.nan for v in per], w, label=LABELS.get(arm, arm))
        for xi, v in zip(x, per):
            ax.scatter(np.full(len(v), xi), v, s=5, color="k", zorder=3)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - w / 2, list(keys.values()), fontsize=7)


def plot_scores(scores: pd.DataFrame, path) -> None:
    fig, (ax,) = new_figure(width=9.0)
    _bars(ax, scores, TASKS, _arms(scores))
    ax.set(ylabel="score on test scenes", title="every task per arm (bar: mean over seeds, dots: seeds)")
    ax.legend(fontsize=6, ncol=2)
    save(fig, path)


def plot_splits(scores: pd.DataFrame, path) -> None:
    arms = _arms(scores)
    fig, (left, right) = new_figure(ncols=2, width=5.0)
    shape_keys = {f"region_text_r1.{f}": f for f in SHAPES}
    wrong = scores[(scores["arm"] == "pixclip") & scores["metric"].str.endswith("@no_prompt")].copy()
    wrong["arm"] = "pixclip@no_prompt"
    wrong["metric"] = wrong["metric"].str.replace("@no_prompt", "", regex=False)
    LABELS.setdefault("pixclip@no_prompt", "PixCLIP, region prompt removed")
    _bars(left, pd.concat([scores, wrong]), shape_keys, [a for a in arms if a != RANDOM] + ["pixclip@no_prompt"])
    left.set(ylabel="region->text R@1", title="per mask shape family")
    left.legend(fontsize=5)
    trunc = scores[(scores["arm"] == "pixclip") & scores["metric"].str.endswith("@truncated")].copy()
    trunc["arm"] = "pixclip@truncated"
    trunc["metric"] = trunc["metric"].str.replace("@truncated", "", regex=False)
    LABELS.setdefault("pixclip@truncated", "PixCLIP, captions cut to short context")
    len_keys = {"long_text_r1.within_short": "caption fits\nshort context", "long_text_r1.beyond_short": "caption longer\nthan short context"}
    _bars(right, pd.concat([scores, trunc]), len_keys, [a for a in arms if a != RANDOM] + ["pixclip@truncated"])
    right.set(ylabel="long-text retrieval R@1 (mean I2T, T2I)", title="per caption length")
    right.legend(fontsize=5)
    save(fig, path)


def plot_examples(arrays, scenes: pd.DataFrame, regions: pd.DataFrame, preds: pd.DataFrame, arms, path,
                  n: int = 4) -> None:
    """Test scenes with three or more regions: each mask outlined and numbered; per mask the truth and the phrase
    each arm (first seed) retrieves with that mask as prompt."""
    from skimage.segmentation import find_boundaries

    seed = preds["seed"].min()
    test = scenes[(scenes["split"] == "test") & (scenes["n_objects"] >= 3)
                  & (scenes["seed"] == seed if "seed" in scenes else True)].head(n)
    show = [a for a in ("clip", "alphaclip", "pixclip") if a in arms]
    fig, axes = new_grid(2, len(test), width=2.6, height=2.4)
    for j, sc in enumerate(test.itertuples(index=False)):
        img = arrays["images"][sc.scene].astype(float) / 255
        lab = arrays["labels"][sc.scene]
        img[find_boundaries(lab, mode="inner")] = 1.0
        ax = axes[0][j]
        ax.imshow(img, interpolation="nearest")
        ax.set_axis_off()
        lines = []
        for r in regions[regions["scene"] == sc.scene].itertuples(index=False):
            yy, xx = np.nonzero(lab == r.slot + 1)
            ax.text(xx.mean(), yy.mean(), str(r.slot + 1), color="white", fontsize=8, ha="center", va="center",
                    fontweight="bold")
            got = {a: preds.loc[(preds["arm"] == a) & (preds["seed"] == seed) & (preds["scene"] == sc.scene)
                                & (preds["slot"] == r.slot), "retrieved"].iloc[0] for a in show}
            lines.append(f"{r.slot + 1} ({r.shape}): {r.phrase}")
            lines += [f"   {LABELS[a]}: {p[2:]}{' ✓' if p == r.phrase else ''}" for a, p in got.items()]
        axes[1][j].text(0, 1, "\n".join(lines), fontsize=5.5, va="top", family="monospace")
        axes[1][j].set_axis_off()
    save(fig, path)


def run(job) -> None:
    s = job.params
    scores = read_parquet(job.input.scores)
    plot_scores(scores, job.output.scores)
    plot_splits(scores, job.output.splits)
    plot_examples(read_npz(job.input.arrays), read_parquet(job.input.scenes), read_parquet(job.input.regions),
                  read_parquet(job.input.predictions), s["arms"], job.output.examples)
