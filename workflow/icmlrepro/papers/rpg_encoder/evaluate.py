"""Stage ``evaluate``: metrics.json from the localization ranks, the evolution ledgers and coverage.

Every metric has one value per seed. Quantities that no seed changes (coverage, the release
replay, encoding cost) repeat their single value for each seed, so that every claim is judged
the same way; their interval is then a point.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile

from .navigation import METHODS

BASELINES = ("bm25_code", "dep_graph")
TASKSETS = {"test": "synthetic", "changelog": "changelog"}


def accuracy_table(ranks: pd.DataFrame) -> pd.DataFrame:
    """Acc@1/Acc@5 at function and file level per seed, method and task set (bootstrap weights applied)."""
    rows = []
    for (seed, method, taskset), g in ranks.groupby(["seed", "method", "taskset"], sort=True):
        w = g["draws"].to_numpy(dtype=float)
        for level, col in (("function", "unit_rank"), ("file", "file_rank")):
            for k in (1, 5):
                hit = (g[col].to_numpy() < k).astype(float)
                rows.append({"seed": seed, "method": method, "taskset": TASKSETS[taskset], "level": level, "k": k,
                             "accuracy": float((w * hit).sum() / w.sum()) if w.sum() else float("nan"),
                             "tasks": int(w.sum())})
    return pd.DataFrame(rows)


def coverage_table(inventory: pd.DataFrame, nodes: pd.DataFrame) -> pd.DataFrame:
    """Per repository: reference entities, those with an RPG unit node carrying a feature, those documented."""
    units = nodes[nodes.kind.isin(["class", "function", "method"]) & (nodes.text.str.len() > 0)]
    have = set(zip(units.repo, units.path, units.qualname))
    rows = []
    for repo, g in inventory.groupby("repo", sort=True):
        hit = [(repo, p, q) in have for p, q in zip(g.path, g.qualname)]
        rows.append({"repo": repo, "entities": len(g), "rpg": int(np.sum(hit)), "docs": int(g.documented.sum())})
    return pd.DataFrame(rows, columns=["repo", "entities", "rpg", "docs"])


def _repeat(value: float, seeds: list[int]) -> list[float]:
    return [float(value)] * len(seeds)


def _slope(x, y) -> float:
    x, y = np.log(np.asarray(x, float)), np.log(np.maximum(np.asarray(y, float), 1e-9))
    return float(np.polyfit(x, y, 1)[0]) if len(set(x)) > 1 else float("nan")


def build_metrics(p, acc: pd.DataFrame, cov: pd.DataFrame, releases: pd.DataFrame, equality: pd.DataFrame,
                  commits: pd.DataFrame, stats: pd.DataFrame, timing: pd.DataFrame,
                  changelog_source: str) -> MetricsFile:
    seeds = [int(s) for s in p["seeds"]]
    mf = MetricsFile("rpg_encoder", p["scale"], replicate="seed", replicates=seeds)
    a = acc.set_index(["seed", "method", "taskset", "level", "k"])["accuracy"].sort_index()
    source = {"synthetic": "synthetic issues (test half)",
              "changelog": "CPython changelog entries, name masked" if changelog_source == "changelog"
              else "FALLBACK synthetic stdlib issues (no changelog file on this machine)"}

    def per_seed(method, taskset, level, k):
        return np.array([a.get((s, method, taskset, level, k), np.nan) for s in seeds])

    for taskset in ("synthetic", "changelog"):
        sfx = "" if taskset == "synthetic" else ".changelog"
        for level in ("function", "file"):
            for k in (1, 5):
                for m in METHODS:
                    mf.add(f"acc{k}.{level}.{m}.{taskset}", per_seed(m, taskset, level, k), unit="fraction",
                           direction="higher", description=f"{level}-level Acc@{k} of {m} on {source[taskset]}")
                best = np.nanmax([per_seed(b, taskset, level, k) for b in BASELINES], axis=0)
                tag = "" if level == "function" else "_file"
                mf.add(f"acc{k}{tag}_rpg_minus_best_baseline{sfx}", per_seed("rpg", taskset, level, k) - best,
                       unit="fraction", direction="higher",
                       description=f"{level}-level Acc@{k} of RPG navigation minus the better of BM25-over-code and "
                                   f"dependency-graph-only, per seed, on {source[taskset]}")
        n = acc[(acc.taskset == taskset) & (acc.method == "rpg") & (acc.k == 1) & (acc.level == "function")]
        mf.add(f"n_tasks.{taskset}", n.set_index("seed").loc[seeds, "tasks"].to_numpy(), unit="tasks",
               description=f"tasks evaluated per seed ({source[taskset]})")

    judged = releases[releases.judged] if len(releases) else releases
    kind = judged["kind"].iloc[0] if len(judged) else "none"
    what = {"series": "consecutive pinned releases", "vendored": "FALLBACK vendored copies several releases apart",
            "none": "no release copies found"}[kind]
    inc, full = (judged["incremental_cost"].sum(), judged["full_cost"].sum()) if len(judged) else (np.nan, np.nan)
    mf.add("maintenance_cost_reduction", _repeat(1 - inc / full if full else np.nan, seeds), unit="fraction",
           direction="higher", description=f"1 - lifting calls (units, file summaries, placements) of incremental "
                                           f"updates / of full rebuilds, summed over the differences of {what}")
    if len(judged):
        mf.add("maintenance_cost_reduction.units_only",
               _repeat(1 - judged["incremental_unit"].sum() / judged["full_unit"].sum(), seeds), unit="fraction",
               direction="higher", description=f"as maintenance_cost_reduction, counting re-lifted units only ({what})")
        last = judged.groupby("package").tail(1)
        mf.add("feature_agreement_incremental_vs_full", _repeat(last["feature_agreement"].min(), seeds),
               unit="fraction", direction="higher",
               description="share of unit features equal between the incrementally kept graph and a full rebuild "
                           "at the last release (docstring-only edits are not re-lifted, as in the paper)")
    vend = releases[releases.kind == "vendored"] if len(releases) else releases
    if len(vend):
        mf.add("maintenance_cost_reduction.vendored",
               _repeat(1 - vend["incremental_cost"].sum() / vend["full_cost"].sum(), seeds), unit="fraction",
               direction="higher", description="the same reduction over vendored copies several releases apart")

    if len(equality):
        eq = equality.groupby("seed")[["acc5_incremental", "acc5_full", "tasks"]].apply(
            lambda g: pd.Series({c: np.average(g[c], weights=g["tasks"]) for c in ("acc5_incremental", "acc5_full")}))
        eq = eq.reindex(seeds)
        mf.add("acc5_rpg_incremental_minus_full", (eq["acc5_incremental"] - eq["acc5_full"]).to_numpy(),
               unit="fraction", direction="none",
               description="function-level Acc@5 of RPG navigation on the incrementally kept graph minus on a full "
                           "rebuild, at the last release, synthetic tasks per seed")
        mf.add("acc5_rpg_after_incremental_updates", eq["acc5_incremental"].to_numpy(), unit="fraction",
               direction="higher", description="function-level Acc@5 on the incrementally kept graph")
    else:
        mf.add("acc5_rpg_incremental_minus_full", _repeat(np.nan, seeds), unit="fraction", direction="none",
               description="not measured: no release series to replay")

    growth, slope_inc, slope_full, red = [], [], [], []
    for s in seeds:
        c = commits[commits.seed == s].groupby("repo")[["incremental_cost", "full_cost", "units"]].mean()
        small, large = c["full_cost"].idxmin(), c["full_cost"].idxmax()
        growth.append((c.loc[large, "incremental_cost"] / c.loc[small, "incremental_cost"])
                      / (c.loc[large, "full_cost"] / c.loc[small, "full_cost"]))
        slope_inc.append(_slope(c["units"], c["incremental_cost"]))
        slope_full.append(_slope(c["units"], c["full_cost"]))
        cs = commits[commits.seed == s]
        red.append(1 - cs["incremental_cost"].sum() / cs["full_cost"].sum())
    mf.add("cost_growth_incremental_over_full", growth, unit="ratio", direction="lower",
           description="(incremental cost per commit, largest / smallest repository) divided by the same ratio of "
                       "full-rebuild costs, for commits of one fixed size")
    mf.add("cost_slope_incremental", slope_inc, unit="log-log slope", direction="lower",
           description="slope of log incremental cost per commit against log repository size (units)")
    mf.add("cost_slope_full", slope_full, unit="log-log slope", direction="none",
           description="slope of log full-rebuild cost against log repository size (units)")
    mf.add("maintenance_cost_reduction.simulated", red, unit="fraction", direction="higher",
           description="1 - incremental / full-rebuild lifting calls over the simulated commits")

    total = cov[["entities", "rpg", "docs"]].sum()
    mf.add("coverage_rpg", _repeat(total["rpg"] / total["entities"], seeds), unit="fraction", direction="higher",
           description="share of the functions/classes/methods the modules define at run time that have an RPG "
                       "unit node with a lifted feature (all repositories)")
    mf.add("coverage_docs", _repeat(total["docs"] / total["entities"], seeds), unit="fraction", direction="higher",
           description="share of them a documentation-only representation covers (own docstring)")
    mf.add("coverage_rpg_minus_docs", _repeat((total["rpg"] - total["docs"]) / total["entities"], seeds),
           unit="fraction", direction="higher", description="coverage_rpg - coverage_docs")
    for r in cov.itertuples(index=False):
        mf.add(f"coverage_rpg.{r.repo}", _repeat(r.rpg / r.entities, seeds), unit="fraction", direction="higher",
               description=f"coverage_rpg of {r.repo} ({r.entities} entities)")
        mf.add(f"coverage_docs.{r.repo}", _repeat(r.docs / r.entities, seeds), unit="fraction", direction="higher",
               description=f"coverage_docs of {r.repo}")

    for r in stats.itertuples(index=False):
        mf.add(f"encode_seconds.{r.repo}", _repeat(r.seconds, seeds), unit="s", direction="lower", timing=True,
               description=f"wall time of the full build of {r.repo} ({r.files} files, {r.units} units), run once")
    mf.add("localize_seconds", timing.set_index("seed").loc[seeds, "seconds"].to_numpy(), unit="s",
           direction="lower", timing=True, description="wall time of tuning and localization per seed")
    return mf


def run(job) -> None:
    p = job.params
    ranks = read_parquet(job.input.ranks)
    acc = accuracy_table(ranks)
    cov = coverage_table(read_parquet(job.input.inventory), read_parquet(job.input.nodes))
    changelog = read_parquet(job.input.changelog)
    source = changelog["source"].iloc[0] if len(changelog) else "none"
    mf = build_metrics(p, acc, cov, read_parquet(job.input.releases), read_parquet(job.input.equality),
                       read_parquet(job.input.commits), read_parquet(job.input.stats),
                       read_parquet(job.input.timing), source)
    write_parquet(job.output.accuracy, acc)
    write_parquet(job.output.coverage, cov)
    mf.write(job.output.metrics)
