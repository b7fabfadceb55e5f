"""Stage ``evaluate``: metrics.json from the localization ranks, the evolution ledgers and coverage.

Every metric has one value per seed. Localization metrics are the main (leak-free) tasks, with
the tasks as first written beside them; the fixed sets (changelog tasks, modules of the coverage
check, releases with a unit change) are resampled with replacement per seed, so their spread is
that of a benchmark of that size. Quantities that no seed changes at all (per-repository
coverage, encoding time) repeat their single value and are not judged.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed

from .navigation import METHODS
from .reconstruction import bootstrap_shares, reconstruction_table

BASELINES = ("bm25_code", "dep_graph")
TASKSETS = {"test": "synthetic", "changelog": "changelog"}
AGREEMENT = ("acc5_incremental", "acc5_full", "feature_agreement", "summary_agreement", "subarea_ari", "area_ari",
             "subarea_ari_null", "area_ari_null")


def _weighted(g: pd.DataFrame, values) -> float:
    w = g["draws"].to_numpy(dtype=float)
    v = np.asarray(values, dtype=float)
    ok = ~np.isnan(v)
    return float((w[ok] * v[ok]).sum() / w[ok].sum()) if w[ok].sum() else float("nan")


def accuracy_table(ranks: pd.DataFrame) -> pd.DataFrame:
    """Acc@1/Acc@5 at function and file level per seed, method, task set and variant (bootstrap weights
    applied); the prefixed variant also on its tasks that leak the location and on those that do not."""
    rows = []
    for (seed, method, taskset, variant), g in ranks.groupby(["seed", "method", "taskset", "variant"], sort=True):
        subsets = {"all": g}
        if variant == "prefixed":
            subsets.update(leaked=g[g.location_leak], unleaked=g[~g.location_leak])
        for subset, d in subsets.items():
            for level, col in (("function", "unit_rank"), ("file", "file_rank")):
                for k in (1, 5):
                    rows.append({"seed": seed, "method": method, "taskset": TASKSETS[taskset], "variant": variant,
                                 "subset": subset, "level": level, "k": k,
                                 "accuracy": _weighted(d, d[col].to_numpy() < k) if len(d) else float("nan"),
                                 "tasks": int(d["draws"].sum())})
    return pd.DataFrame(rows)


def task_table(ranks: pd.DataFrame, nodes: pd.DataFrame) -> pd.DataFrame:
    """Per seed and task set: leak rate of the prefixed and of the main queries, copied-word overlap,
    and the chance Acc@5 (5 / candidates of the task's component, at function and file level; the
    repository's when ``ranks`` has no candidate counts)."""
    units = nodes[nodes.kind.isin(["function", "method"])]
    n_units, n_files = units.groupby("repo").size(), units.groupby("repo")["path"].nunique()
    if "candidates" not in ranks:
        ranks = ranks.assign(candidates=n_units.reindex(ranks.repo).to_numpy(),
                             candidate_files=n_files.reindex(ranks.repo).to_numpy())
    rows = []
    one = ranks[(ranks.method == ranks.method.iloc[0]) & (ranks.variant == "main")] if len(ranks) else ranks
    for (seed, taskset), g in one.groupby(["seed", "taskset"], sort=True):
        rows.append({"seed": seed, "taskset": TASKSETS[taskset],
                     "leak_prefixed": _weighted(g, g.location_leak), "leak_main": _weighted(g, g.location_leak_main),
                     "overlap_indexed": _weighted(g, g.overlap_indexed), "overlap_after": _weighted(g, g.overlap_after),
                     "chance_function": _weighted(g, np.minimum(1, 5 / g.candidates.to_numpy(dtype=float))),
                     "chance_file": _weighted(g, np.minimum(1, 5 / g.candidate_files.to_numpy(dtype=float))),
                     "candidates": _weighted(g, g.candidates.to_numpy(dtype=float))})
    return pd.DataFrame(rows)


def _repeat(value: float, seeds: list[int]) -> list[float]:
    return [float(value)] * len(seeds)


def _slope(x, y) -> float:
    x, y = np.log(np.asarray(x, float)), np.log(np.maximum(np.asarray(y, float), 1e-9))
    return float(np.polyfit(x, y, 1)[0]) if len(set(x)) > 1 else float("nan")


def build_metrics(p, acc: pd.DataFrame, tasks: pd.DataFrame, cov: pd.DataFrame, releases: pd.DataFrame,
                  equality: pd.DataFrame, commits: pd.DataFrame, stats: pd.DataFrame, timing: pd.DataFrame,
                  tuning: pd.DataFrame, changelog_source: str) -> MetricsFile:
    seeds = [int(s) for s in p["seeds"]]
    mf = MetricsFile("rpg_encoder", p["scale"], replicate="seed", replicates=seeds)
    a = acc.set_index(["seed", "method", "taskset", "variant", "subset", "level", "k"])["accuracy"].sort_index()
    source = {"synthetic": "synthetic issues (test half), name and location masked, the copied words removed "
                           "from the gold unit's indexed text",
              "changelog": "CPython changelog entries, name and location masked" if changelog_source == "changelog"
              else "FALLBACK synthetic stdlib issues (no changelog file on this machine), name and location masked"}
    beside = {"copied": "the same queries with the gold unit's indexed text left whole (words copied from it)",
              "prefixed": "the queries as first written: location kept (module/class prefix), nothing removed"}

    def per_seed(method, taskset, level, k, variant="main", subset="all"):
        return np.array([a.get((s, method, taskset, variant, subset, level, k), np.nan) for s in seeds])

    for taskset in ("synthetic", "changelog"):
        sfx = "" if taskset == "synthetic" else ".changelog"
        for level in ("function", "file"):
            for k in (1, 5):
                for m in METHODS:
                    mf.add(f"acc{k}.{level}.{m}.{taskset}", per_seed(m, taskset, level, k), unit="fraction",
                           direction="higher", description=f"{level}-level Acc@{k} of {m} on {source[taskset]}")
            tag = "" if level == "function" else "_file"
            for b in BASELINES:
                mf.add(f"acc5{tag}_rpg_minus_{b}{sfx}", per_seed("rpg", taskset, level, 5) - per_seed(b, taskset, level, 5),
                       unit="fraction", direction="higher",
                       description=f"{level}-level Acc@5 of RPG navigation minus {b}, per seed, on {source[taskset]}")
            mf.add(f"acc5.{level}.chance.{taskset}", tasks[tasks.taskset == taskset].set_index("seed")
                   .reindex(seeds)[f"chance_{level}"].to_numpy(), unit="fraction", direction="none",
                   description=f"{level}-level Acc@5 of a random ranking (5 / candidates of the task's repository)")
        variants = ("copied", "prefixed") if taskset == "synthetic" else ("prefixed",)
        for variant in variants:
            for level in ("function", "file"):
                for m in METHODS:
                    mf.add(f"acc5.{level}.{m}.{taskset}.{variant}", per_seed(m, taskset, level, 5, variant),
                           unit="fraction", direction="higher",
                           description=f"{level}-level Acc@5 of {m}, {taskset}: {beside[variant]}")
        for subset in ("leaked", "unleaked"):
            for level in ("function", "file"):
                for m in METHODS:
                    mf.add(f"acc5.{level}.{m}.{taskset}.prefixed.{subset}",
                           per_seed(m, taskset, level, 5, "prefixed", subset), unit="fraction", direction="higher",
                           description=f"{level}-level Acc@5 of {m} on the prefixed {taskset} queries that "
                                       f"{'leak' if subset == 'leaked' else 'do not leak'} the gold file's stem or class")
        t = tasks[tasks.taskset == taskset].set_index("seed").reindex(seeds)
        mf.add(f"location_leak_rate.{taskset}", t["leak_prefixed"].to_numpy(), unit="fraction", direction="lower",
               description=f"share of the {taskset} queries as first written (prefix kept) that contain the gold "
                           f"file's stem or class as word tokens")
        mf.add(f"component_units.{taskset}", t["candidates"].to_numpy(), unit="units", direction="none",
               description=f"mean number of functions/methods a {taskset} task is ranked among (the units of its "
                           f"component; chance Acc@5 is 5 over it)")
        mf.add(f"location_leak_rate.{taskset}.main", t["leak_main"].to_numpy(), unit="fraction", direction="lower",
               description=f"the same share for the main (location-masked) {taskset} queries")
        mf.add(f"copied_overlap.{taskset}", t["overlap_indexed"].to_numpy(), unit="fraction", direction="lower",
               description=f"mean share of a main {taskset} query's distinct tokens that occur in the gold unit's own "
                           f"indexed text (its code with path and name, and its feature phrase)")
        if taskset == "synthetic":
            mf.add("copied_overlap.synthetic.after_removal", t["overlap_after"].to_numpy(), unit="fraction",
                   direction="lower", description="the same share once the sampled description words are removed "
                                                  "from the gold unit's indexed text (what the main task searches)")
        n = acc[(acc.taskset == taskset) & (acc.method == "rpg") & (acc.k == 1) & (acc.level == "function")
                & (acc.variant == "main") & (acc.subset == "all")]
        mf.add(f"n_tasks.{taskset}", n.set_index("seed").loc[seeds, "tasks"].to_numpy(), unit="tasks",
               description=f"tasks evaluated per seed ({source[taskset]})")

    _evolution_metrics(mf, seeds, releases, equality)
    _simulated_commit_metrics(mf, seeds, commits)
    _coverage_metrics(mf, seeds, cov)
    _tuning_metrics(mf, seeds, tuning, p["tuning"])
    _timing_metrics(mf, seeds, stats, timing)
    return mf


def _evolution_metrics(mf: MetricsFile, seeds: list[int], releases: pd.DataFrame, equality: pd.DataFrame) -> None:
    """Cost reduction over the replayed releases (those with a unit change, resampled per seed; all
    releases beside) and the agreement of the incrementally kept graph with a full rebuild."""
    judged = releases[releases.judged] if len(releases) else releases
    kind = judged["kind"].iloc[0] if len(judged) else "none"
    what = {"series": "consecutive pinned releases", "vendored": "FALLBACK vendored copies several releases apart",
            "none": "no release copies found"}[kind]
    red, red_all, red_units, n_changed = [], [], [], []
    for s in seeds:
        j = judged[judged.seed == s] if len(judged) else judged
        changed = j[(j.modified_files + j.added_files + j.deleted_files) > 0] if len(j) else j
        n_changed.append(len(changed))
        pick = np.random.default_rng(derive_seed(s, "rpg_encoder", "release_bootstrap")).integers(
            0, max(len(changed), 1), len(changed))
        sample = changed.iloc[pick]
        red.append(1 - sample.incremental_cost.sum() / sample.full_cost.sum() if len(sample) else np.nan)
        red_units.append(1 - sample.incremental_unit.sum() / sample.full_unit.sum() if len(sample) else np.nan)
        red_all.append(1 - j.incremental_cost.sum() / j.full_cost.sum() if len(j) else np.nan)
    mf.add("maintenance_cost_reduction", red, unit="fraction", direction="higher",
           description=f"1 - lifting calls (units, file summaries, placements) of incremental updates / of full "
                       f"rebuilds, over the differences of {what} that change a unit (releases without one left "
                       f"out), resampled with replacement per seed")
    mf.add("maintenance_cost_reduction.units_only", red_units, unit="fraction", direction="higher",
           description="as maintenance_cost_reduction, counting re-lifted units only")
    mf.add("maintenance_cost_reduction.all_releases", red_all, unit="fraction", direction="higher",
           description=f"the reduction over every difference of {what}, releases without a unit change included "
                       f"(they cost nothing incrementally and a full rebuild each)")
    mf.add("releases_with_unit_changes", n_changed, unit="differences", direction="none",
           description=f"differences of {what} that add, change or delete a unit (of {len(judged) // max(len(seeds), 1)})")
    vend = releases[releases.kind == "vendored"] if len(releases) else releases
    if len(vend):
        mf.add("maintenance_cost_reduction.vendored",
               [1 - vend[vend.seed == s].incremental_cost.sum() / vend[vend.seed == s].full_cost.sum() for s in seeds],
               unit="fraction", direction="higher",
               description="the reduction over vendored copies several releases apart")

    if not len(equality):
        for name in ("acc5_rpg_incremental_minus_full", "feature_agreement_incremental_vs_full",
                     "summary_agreement_incremental_vs_full", "subarea_ari_incremental_vs_full",
                     "subarea_ari_incremental_minus_rebuild_null"):
            mf.add(name, [np.nan] * len(seeds), unit="fraction", direction="none",
                   description="not measured: no release series to replay")
        return
    eq = equality.groupby("seed").apply(
        lambda g: pd.Series({c: np.average(g[c], weights=g["tasks"]) for c in AGREEMENT}), include_groups=False)
    eq = eq.reindex(seeds)
    mf.add("acc5_rpg_incremental_minus_full", (eq["acc5_incremental"] - eq["acc5_full"]).to_numpy(),
           unit="fraction", direction="none",
           description="function-level Acc@5 of RPG navigation on the incrementally kept graph minus on a full "
                       "rebuild, at the last release, synthetic tasks per seed")
    mf.add("acc5_rpg_after_incremental_updates", eq["acc5_incremental"].to_numpy(), unit="fraction",
           direction="higher", description="function-level Acc@5 on the incrementally kept graph")
    mf.add("feature_agreement_incremental_vs_full", eq["feature_agreement"].to_numpy(), unit="fraction",
           direction="higher", description="share of unit features equal between the incrementally kept graph and "
                                           "a full rebuild at the last release (docstring-only edits are not "
                                           "re-lifted, as in the paper)")
    mf.add("summary_agreement_incremental_vs_full", eq["summary_agreement"].to_numpy(), unit="fraction",
           direction="higher", description="share of file summaries equal between the kept graph and a full rebuild")
    for level in ("subarea", "area"):
        mf.add(f"{level}_ari_incremental_vs_full", eq[f"{level}_ari"].to_numpy(), unit="ARI", direction="higher",
               description=f"adjusted Rand index of the file -> {level} assignment, kept graph vs full rebuild "
                           f"(same clustering seed), at the last release")
        mf.add(f"{level}_ari_rebuild_null", eq[f"{level}_ari_null"].to_numpy(), unit="ARI", direction="none",
               description=f"the same index between two full rebuilds that differ only in the clustering seed")
        mf.add(f"{level}_ari_incremental_minus_rebuild_null", (eq[f"{level}_ari"] - eq[f"{level}_ari_null"]).to_numpy(),
               unit="ARI", direction="higher",
               description=f"{level}_ari_incremental_vs_full minus {level}_ari_rebuild_null: how much further the "
                           f"kept hierarchy is from a rebuild than another rebuild is")


def _simulated_commit_metrics(mf: MetricsFile, seeds: list[int], commits: pd.DataFrame) -> None:
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


def _coverage_metrics(mf: MetricsFile, seeds: list[int], cov: pd.DataFrame) -> None:
    """Reconstruction from the RPG alone against the run-time inventory, beside the documentation-only
    representation; per seed a resample of the modules (the spread a benchmark of this size has)."""
    cols = ["rpg", "rpg_name", "docs"]
    shares = [bootstrap_shares(cov, cols, np.random.default_rng(derive_seed(s, "rpg_encoder", "coverage")))
              for s in seeds]
    mf.add("coverage_rpg", [x["rpg"] for x in shares], unit="fraction", direction="higher",
           description="share of the functions/classes/methods the modules define at run time that the stubs "
                       "regenerated from the RPG alone rebuild with the same name, kind and (functions) parameter "
                       "names, kinds and defaults; modules resampled per seed")
    mf.add("coverage_rpg.names", [x["rpg_name"] for x in shares], unit="fraction", direction="higher",
           description="the same share counting name and kind only (no signature check)")
    mf.add("coverage_docs", [x["docs"] for x in shares], unit="fraction", direction="higher",
           description="share a documentation-only representation rebuilds: own docstring, and for a function "
                       "every parameter named in it")
    mf.add("coverage_rpg_minus_docs", [x["rpg"] - x["docs"] for x in shares], unit="fraction", direction="higher",
           description="coverage_rpg - coverage_docs (same resample)")
    for repo, g in cov.groupby("repo", sort=True):
        for col, name in (("rpg", "coverage_rpg"), ("docs", "coverage_docs")):
            mf.add(f"{name}.{repo}", _repeat(g[col].mean(), seeds), unit="fraction", direction="higher",
                   description=f"{name} of {repo} ({len(g)} entities, all modules: one value)")


def _tuning_metrics(mf: MetricsFile, seeds: list[int], tuning: pd.DataFrame, grids: dict) -> None:
    """Per method, the share of seeds whose chosen setting puts a tuned weight (a knob with at least 3
    grid values) at the smallest or largest value tried: there the grid may have cut the optimum off."""
    chosen = tuning[tuning.chosen]
    for method in METHODS:
        wide = {k: (min(v), max(v)) for k, v in grids[method].items() if len(v) >= 3}
        edge = []
        for s in seeds:
            row = chosen[(chosen.method == method) & (chosen.seed == s)]
            params = json.loads(row.params_json.iloc[0]) if len(row) else {}
            edge.append(float(any(params.get(k) in bounds for k, bounds in wide.items())) if params else np.nan)
        mf.add(f"tuned_at_grid_edge.{method}", edge, unit="fraction", direction="none",
               description=f"1 when the setting tuned for {method} has a weight with >= 3 grid values "
                           f"({', '.join(wide) or 'none'}) at an end of its grid, per seed")


def _timing_metrics(mf: MetricsFile, seeds: list[int], stats: pd.DataFrame, timing: pd.DataFrame) -> None:
    for r in stats.itertuples(index=False):
        mf.add(f"encode_seconds.{r.repo}", _repeat(r.seconds, seeds), unit="s", direction="lower", timing=True,
               description=f"wall time of the full build of {r.repo} ({r.files} files, {r.units} units), run once")
    mf.add("localize_seconds", timing.set_index("seed").loc[seeds, "seconds"].to_numpy(), unit="s",
           direction="lower", timing=True, description="wall time of tuning and localization per seed")


def run(job) -> None:
    p = job.params
    ranks = read_parquet(job.input.ranks)
    nodes = read_parquet(job.input.nodes)
    acc, tasks = accuracy_table(ranks), task_table(ranks, nodes)
    cov = reconstruction_table(read_parquet(job.input.inventory), nodes)
    changelog = read_parquet(job.input.changelog)
    source = changelog["source"].iloc[0] if len(changelog) else "none"
    mf = build_metrics(p, acc, tasks, cov, read_parquet(job.input.releases), read_parquet(job.input.equality),
                       read_parquet(job.input.commits), read_parquet(job.input.stats),
                       read_parquet(job.input.timing), read_parquet(job.input.tuning), source)
    write_parquet(job.output.accuracy, acc)
    write_parquet(job.output.coverage, cov)
    mf.write(job.output.metrics)
