"""Per-seed metrics of the ladder: probe accuracy, part-by-part gains, the two diagnostics.

Every metric is one value per seed; a value that summarises several graphs is the mean over
those graphs for that seed. Graphs whose measured edge homophily (mean over the seeds' draws) is
below ``heterophilic_below`` form the heterophilic group (suffix ``.heterophilic``), the rest the
homophilic one.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_json, read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile

# Each part of C2-GMAE is the step between two adjacent rungs of the ladder.
PARTS = {"pe": ("graphmae", "pe"), "density_masking": ("pe", "pe_density"),
         "hetero_amplification": ("pe_density", "c2gmae")}


def load_tables(job_input, s: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """info, the ladder's rungs (``init`` 0), the retrain null (``init`` 1), coverage bins, loss curves;
    the raw-feature references are rows ``raw_features`` / ``mlp`` / ``majority_class`` of the rungs
    table with only their test accuracy."""
    info = pd.DataFrame([read_json(job_input[f"info_{g}"]) for g in s["graphs"]])
    info["heterophilic"] = info["edge_homophily"] < s["analysis"]["heterophilic_below"]
    tables = {t: pd.concat([read_parquet(job_input[f"{t}_{g}"]) for g in s["graphs"]], ignore_index=True)
              for t in ("rungs", "bins", "curves", "refs")}
    rungs = tables["rungs"].merge(info[["graph", "edge_homophily", "heterophilic"]], on="graph")
    cov = tables["bins"].groupby(["graph", "seed", "rung"])["coverage"]
    cov = pd.DataFrame({"min_bin_coverage": cov.min(), "mean_coverage": cov.mean(),
                        "bin_coverage_spread": cov.max() - cov.min()}).reset_index()
    null = rungs[rungs.init == 1].drop(columns="init")
    rungs = rungs[rungs.init == 0].drop(columns="init").merge(cov, on=["graph", "seed", "rung"])
    refs = tables["refs"].rename(columns={"reference": "rung"}).merge(
        info[["graph", "edge_homophily", "heterophilic"]], on="graph")
    return info, rungs, null, refs, tables["bins"], tables["curves"]


def matched_pairs(rungs: pd.DataFrame, tol: float) -> pd.DataFrame:
    """Pairs of ladder variants on the same graph and seed whose masked-feature reconstruction
    errors differ by at most ``tol`` (relative to their mean), with their accuracy and
    consistency gaps: the abstract's "similar reconstruction outcomes" made operational."""
    rows = []
    for (graph, seed), grp in rungs.groupby(["graph", "seed"], sort=True):
        for (_, a), (_, b) in combinations(grp.sort_values("rung").iterrows(), 2):
            rel = abs(a.recon_loss - b.recon_loss) / ((a.recon_loss + b.recon_loss) / 2)
            rows.append({"graph": graph, "seed": seed, "pair": f"{a.rung}|{b.rung}", "recon_rel_gap": rel,
                         "matched": rel <= tol, "acc_gap": abs(a.test_acc - b.test_acc),
                         "consistency_gap": abs(a.consistency - b.consistency)})
    return pd.DataFrame(rows)


def retrain_pairs(rungs: pd.DataFrame, null: pd.DataFrame, tol: float) -> pd.DataFrame:
    """The null of ``matched_pairs``: each rung against itself retrained from another initialisation
    (same graph, seed and rate), with the same reconstruction-matching rule."""
    both = rungs.merge(null, on=["graph", "seed", "rung"], suffixes=("", "_retrain"))
    rel = (both.recon_loss - both.recon_loss_retrain).abs() / ((both.recon_loss + both.recon_loss_retrain) / 2)
    return pd.DataFrame({"graph": both.graph, "seed": both.seed, "pair": both.rung + "|retrain",
                         "recon_rel_gap": rel, "matched": rel <= tol,
                         "acc_gap": (both.test_acc - both.test_acc_retrain).abs(),
                         "consistency_gap": (both.consistency - both.consistency_retrain).abs()})


def pair_metrics(mf: MetricsFile, pairs: pd.DataFrame, seeds: list[int], suffix: str, what: str) -> None:
    """Share of reconstruction-matched pairs and their mean accuracy / consistency gaps, per seed."""
    mf.add(f"share_recon_matched_pairs{suffix}", pairs.groupby("seed")["matched"].mean().reindex(seeds).to_numpy(),
           unit="fraction", direction="none", description=f"share of {what} whose reconstruction errors are matched")
    matched = pairs[pairs.matched].groupby("seed")
    for col, unit, label in (("acc_gap", "fraction", "linear-probe accuracy"),
                             ("consistency_gap", "1 - TV distance", "context-use consistency")):
        mf.add(f"{col}_recon_matched_pairs{suffix}", matched[col].mean().reindex(seeds).to_numpy(), unit=unit,
               direction="none", description=f"mean absolute {label} difference between {what} with matched "
                                             f"reconstruction error (NaN for a seed without such pairs)")


def build_metrics(rungs: pd.DataFrame, s: dict, null: pd.DataFrame | None = None,
                  refs: pd.DataFrame | None = None) -> MetricsFile:
    seeds = [int(x) for x in s["seeds"]]
    mf = MetricsFile("c2gmae", s["scale"], replicate="seed", replicates=seeds)
    groups = {"": rungs.graph.unique().tolist(),
              ".heterophilic": rungs[rungs.heterophilic].graph.unique().tolist(),
              ".homophilic": rungs[~rungs.heterophilic].graph.unique().tolist()}
    table = rungs.set_index(["rung", "graph", "seed"]).sort_index()

    def per_seed(col, rung, graphs):
        """Mean over ``graphs`` of ``col`` for ``rung``, one value per seed (NaN if no graph)."""
        if not graphs:
            return np.full(len(seeds), np.nan)
        return np.array([np.mean([table.loc[(rung, g, sd), col] for g in graphs]) for sd in seeds])

    for ref in ("raw_features", "mlp", "majority_class") if refs is not None else ():
        rt = refs[refs.rung == ref].set_index(["graph", "seed"]).test_acc
        for suffix, graphs in groups.items():
            if graphs:
                mf.add(f"probe_acc.{ref}{suffix}", [np.mean([rt[(g, sd)] for g in graphs]) for sd in seeds],
                       unit="fraction", direction="higher",
                       description=f"reference on the raw features: {ref} test accuracy (same split), mean over "
                                   f"{'all' if not suffix else suffix[1:]} graphs")
        for g in groups[""]:
            mf.add(f"probe_acc.{ref}.{g}", [rt[(g, sd)] for sd in seeds], unit="fraction", direction="higher",
                   description=f"reference on the raw features: {ref} test accuracy on {g}")
    for rung in s["rungs"]:
        for suffix, graphs in groups.items():
            if suffix and graphs:
                mf.add(f"probe_acc.{rung}{suffix}", per_seed("test_acc", rung, graphs), unit="fraction",
                       direction="higher", description=f"linear-probe test accuracy of {rung}, mean over {suffix[1:]} graphs")
        for g in groups[""]:
            mf.add(f"probe_acc.{rung}.{g}", per_seed("test_acc", rung, [g]), unit="fraction", direction="higher",
                   description=f"linear-probe test accuracy of {rung} on {g} (learning rate chosen on validation)")
        mf.add(f"probe_acc.{rung}", per_seed("test_acc", rung, groups[""]), unit="fraction", direction="higher",
               description=f"linear-probe test accuracy of {rung}, mean over graphs")
        mf.add(f"tuned_interior.{rung}", per_seed("tuned_interior", rung, groups[""]), unit="fraction",
               direction="none", description=f"share of graphs whose learning rate for {rung}, picked on "
                                             f"validation accuracy (ties within one SE to the default), is "
                                             f"inside the lr grid (1 = interior)")
        mf.add(f"tuning_tie.{rung}", per_seed("tuning_tie", rung, groups[""]), unit="fraction",
               direction="none", description=f"share of graphs where the default rate won {rung}'s pick by the "
                                             f"tie rule (another rate scored higher by less than one SE)")
        mf.add(f"selection_se.{rung}", per_seed("selection_se", rung, groups[""]), unit="fraction",
               direction="none", description=f"standard error of {rung}'s validation accuracy at the best rate "
                                             f"(the tie tolerance of the pick)")
        for col, unit, direction, what in (
                ("consistency", "1 - TV distance", "higher", "consistency of neighbourhood-attention use across masks"),
                ("min_bin_coverage", "fraction", "higher", "training coverage of the least-covered density bin"),
                ("bin_coverage_spread", "fraction", "lower", "max - min training coverage over density bins"),
                ("mean_coverage", "fraction", "higher", "training coverage, mean over density bins"),
                ("bin_mask_count_sd", "nodes", "lower",
                 "standard deviation over epochs of a density bin's masked-node count, mean over bins"),
                ("recon_bin_rel_spread", "fraction", "lower",
                 "(max - min) / mean over density bins of the masked-feature reconstruction error on the "
                 "shared evaluation masks (how unevenly the trained model covers sparse and dense regions)"),
                ("recon_worst_bin", "SCE", "lower",
                 "masked-feature reconstruction error of the worst-reconstructed density bin"),
                ("recon_loss", "SCE", "lower", "masked-feature scaled cosine error on the shared evaluation masks")):
            mf.add(f"{col}.{rung}", per_seed(col, rung, groups[""]), unit=unit, direction=direction,
                   description=f"{what} ({rung}), mean over graphs")
    for suffix, graphs in groups.items():
        if suffix and not graphs:
            continue
        where = f"mean over {'all' if not suffix else suffix[1:]} graphs ({', '.join(graphs)})"
        mf.add(f"acc_c2gmae_minus_graphmae{suffix}",
               per_seed("test_acc", "c2gmae", graphs) - per_seed("test_acc", "graphmae", graphs),
               unit="fraction", direction="higher", description=f"probe accuracy C2-GMAE minus GraphMAE, {where}")
        for part, (before, after) in PARTS.items():
            mf.add(f"acc_gain_{part}{suffix}", per_seed("test_acc", after, graphs) - per_seed("test_acc", before, graphs),
                   unit="fraction", direction="higher",
                   description=f"probe accuracy gain of adding {part} ({after} minus {before}), {where}")
    mf.add("context_consistency_c2gmae_minus_graphmae",
           per_seed("consistency", "c2gmae", groups[""]) - per_seed("consistency", "graphmae", groups[""]),
           unit="1 - TV distance", direction="higher", description="context-use consistency, C2-GMAE minus GraphMAE")
    mf.add("context_consistency_gain_pe",
           per_seed("consistency", "pe", groups[""]) - per_seed("consistency", "graphmae", groups[""]),
           unit="1 - TV distance", direction="higher", description="context-use consistency, +PE rung minus GraphMAE")
    mf.add("coverage_c2gmae_minus_graphmae",
           per_seed("min_bin_coverage", "c2gmae", groups[""]) - per_seed("min_bin_coverage", "graphmae", groups[""]),
           unit="fraction", direction="higher", description="least-covered-bin coverage, C2-GMAE minus GraphMAE")
    for name, (a, b) in {"density_minus_random_masking": ("pe_density", "pe"),
                         "c2gmae_minus_graphmae": ("c2gmae", "graphmae")}.items():
        mf.add(f"recon_bin_rel_spread_{name}",
               per_seed("recon_bin_rel_spread", a, groups[""]) - per_seed("recon_bin_rel_spread", b, groups[""]),
               unit="fraction", direction="lower",
               description=f"relative spread of reconstruction error over density bins, {a} minus {b}")
    mf.add("min_bin_coverage_density_minus_random_masking",
           per_seed("min_bin_coverage", "pe_density", groups[""]) - per_seed("min_bin_coverage", "pe", groups[""]),
           unit="fraction", direction="higher",
           description="least-covered-bin coverage, density-partitioned minus uniform masking (same model otherwise)")
    # "Similar reconstruction, different downstream accuracy": spreads over the ladder's variants.
    rec = rungs.pivot_table(index=["seed", "graph"], columns="rung", values="recon_loss")
    acc = rungs.pivot_table(index=["seed", "graph"], columns="rung", values="test_acc")
    rel = ((rec.max(1) - rec.min(1)) / rec.mean(1)).groupby("seed").mean().loc[seeds]
    spread = (acc.max(1) - acc.min(1)).groupby("seed").mean().loc[seeds]
    mf.add("recon_loss_rel_spread_matched_variants", rel.to_numpy(), unit="fraction", direction="none",
           description="(max - min) / mean of the variants' masked-feature reconstruction error, mean over graphs")
    mf.add("acc_spread_matched_variants", spread.to_numpy(), unit="fraction", direction="none",
           description="max - min linear-probe accuracy over the same variants, mean over graphs")
    pairs = matched_pairs(rungs, s["analysis"]["recon_match_tol"])
    pair_metrics(mf, pairs, seeds, "", "variant pairs (same graph)")
    if null is not None:
        pair_metrics(mf, retrain_pairs(rungs, null, s["analysis"]["recon_match_tol"]), seeds, "_retrain_null",
                     "a rung and itself retrained from another initialisation")
    mf.add("train_seconds", rungs.groupby("seed")["train_seconds"].sum().loc[seeds].to_numpy(), unit="s",
           direction="lower", timing=True, description="wall time of all ladder trainings (all graphs, lr grid) per seed")
    return mf


def run(job) -> None:
    s = job.params
    info, rungs, null, refs, bins, curves = load_tables(job.input, s)
    build_metrics(rungs, s, null, refs).write(job.output.metrics)
    write_parquet(job.output.summary, pd.concat([rungs, refs], ignore_index=True))  # references: test_acc only
    write_parquet(job.output.bins, bins.merge(info[["graph", "edge_homophily"]], on="graph"))
    write_parquet(job.output.curves, curves)
