"""Per-seed metrics from the per-(family, seed) measurement tables.

Role names used in metric keys: ``sgd_high`` is ``sweep[0]`` (the high-noise SGD arm fixed in the
config), ``gd`` full-batch GD at the same learning rate and steps, ``shuffled_sgd`` / ``shuffled_gd``
the same two on permuted labels, ``gd_reg<lam>`` the explicit input-gradient regulariser. The gain of
SGD is ``sgd_high - gd`` (paired: same seed, initialisation, steps and evaluation inputs).

An arm "learned" when its test accuracy is more than ``LEARNED`` of the way from the majority class
to perfect (the calibration gates' bar). Arms that did not learn are left out wherever an arm is
picked or ranked without a gate of its own: the curvature link, the noise-scale rank correlations
and the tuning of the explicit regulariser's lam; ``unlearned_arms`` counts them per seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed
from icmlrepro.core.tuning import accuracy_se, at_grid_edge, pick_with_ties

from .data import SHAPES
from .models import FAMILIES
from .robustness import METHODS

PERTURBATIONS = ("attack", "noise")
LEARNED = 0.3  # share of the way from the majority class to perfect test accuracy (as the claims' gates)
STATS = ("topk", "spearman", "kendall")


def sweep_arm(s: dict) -> str:
    return f"sgd_lr{s['lr']:g}_b{s['batch']}"


def roles(p: dict) -> dict[str, str]:
    """Arm name in the tables -> role name in the metrics."""
    out = {sweep_arm(s): sweep_arm(s) for s in p["sweep"][1:]}
    out[sweep_arm(p["sweep"][0])] = "sgd_high"
    out.update({a: a for a in ("gd", "shuffled_sgd", "shuffled_gd")})
    out.update({f"gd_reg{lam:g}": f"gd_reg{lam:g}" for lam in p["reg_lams"]})
    return out


def workloads(p: dict) -> list[tuple[str, str]]:
    """(data set, model) pairs that the config trains."""
    return [(d, m) for fam, ds in p["datasets"].items() for d in ds for m in FAMILIES[fam]]


def methods_of(model: str) -> tuple[str, ...]:
    return METHODS + (("rollout",) if model.startswith("vit") else ())


def learned(accuracy, majority) -> np.ndarray:
    """Whether test accuracy is more than LEARNED of the way from the majority rate to 1."""
    accuracy, majority = np.asarray(accuracy, float), np.asarray(majority, float)
    return (accuracy - majority) / (1.0 - majority) > LEARNED


def curvature_link(arm_table: pd.DataFrame, sweep_roles: list[str], n_perm: int, seed: int) -> tuple[float, float]:
    """Mean over (data set, model) of the Spearman correlation, across the sweep and GD arms, between
    sharpness and input curvature; and the 95th percentile of the same statistic with the pairing
    shuffled within each group (the null in which the two curvatures are unrelated)."""
    groups = [g.set_index("role").loc[sweep_roles] for _, g in arm_table.groupby(["dataset", "model"])]
    # an arm whose training diverged has no curvature, one that did not learn (column "learned") sits on
    # its initial plateau: its pair is left out; a group needs 3 pairs
    groups = [g[np.isfinite(g["sharpness"]) & np.isfinite(g["input_curvature"])
                & (g["learned"].astype(bool) if "learned" in g else True)] for g in groups]
    groups = [g for g in groups if len(g) >= 3]
    if not groups:
        return float("nan"), float("nan")
    sharp = [g["sharpness"].to_numpy() for g in groups]
    curv = [g["input_curvature"].to_numpy() for g in groups]

    def stat(cs):
        return float(np.mean([stats.spearmanr(s, c).statistic for s, c in zip(sharp, cs)]))

    rng = np.random.default_rng(derive_seed(seed, "attribution_sgd", "curvature_null"))
    null = [stat([rng.permutation(c) for c in curv]) for _ in range(n_perm)]
    return stat(curv), float(np.quantile(null, 0.95))


def pick_reg_lam(grid: list[float], ok: list[bool], scores: list[float], n_eval: int) -> dict[str, float]:
    """The explicit regulariser's lam: the best score (top-k under attack, higher is better) among the lams
    whose model learned (``ok``); ties within the selection's standard error go to the grid's middle lam (or
    the middle of the eligible lams when it did not learn). NaN everywhere when no lam learned."""
    elig = [(g, sc) for g, o, sc in zip(grid, ok, scores) if o]
    if not elig:
        return {"lam": float("nan"), "interior": float("nan"), "tie": float("nan"), "topk": float("nan")}
    vals, sc = [g for g, _ in elig], [x for _, x in elig]
    default = grid[len(grid) // 2] if grid[len(grid) // 2] in vals else vals[len(vals) // 2]
    pick = pick_with_ties(vals, sc, default, tolerance=accuracy_se(max(sc), n_eval))
    return {"lam": float(pick.value), "interior": float(not at_grid_edge(pick.value, grid)),
            "tie": float(pick.moved_by_tie), "topk": float(sc[pick.index])}


def build_metrics(table: pd.DataFrame, p: dict, seeds: list[int]) -> MetricsFile:
    mf = MetricsFile("attribution_sgd", p["scale"], replicate="seed", replicates=seeds)
    role = roles(p)
    t = table.assign(role=table["arm"].map(role))
    t = t.assign(learned=learned(t["accuracy"], t["majority_rate"]))
    r = t.set_index(["seed", "dataset", "model", "role", "perturbation", "method"]).sort_index()
    arm_table = t.drop_duplicates(["seed", "dataset", "model", "role"]).set_index(
        ["seed", "dataset", "model", "role"]).sort_index()
    hd, hm = p["headline"]["dataset"], p["headline"]["model"]
    sweep_roles = ["sgd_high", *(sweep_arm(s) for s in p["sweep"][1:]), "gd"]

    def v(ds, m, arm, pert, meth, col="topk"):
        return np.array([float(r.loc[(s, ds, m, arm, pert, meth), col]) for s in seeds])

    def a(ds, m, arm, col):
        return np.array([float(arm_table.loc[(s, ds, m, arm), col]) for s in seeds])

    for ds, m in workloads(p):
        arms = sweep_roles + (["shuffled_sgd", "shuffled_gd", *(f"gd_reg{x:g}" for x in p["reg_lams"])]
                              if (ds, m) == (hd, hm) else [])
        for arm in arms:
            mf.add(f"accuracy.{ds}.{m}.{arm}", a(ds, m, arm, "accuracy"), unit="fraction", direction="higher",
                   description=f"test accuracy ({ds}, {m}, {arm})")
            for col in ("sharpness", "input_curvature"):
                mf.add(f"{col}.{ds}.{m}.{arm}", a(ds, m, arm, col), unit="", direction="none",
                       description=f"{col.replace('_', ' ')} ({ds}, {m}, {arm})")
            mf.add(f"clipped_share.{ds}.{m}.{arm}", a(ds, m, arm, "clipped_share"), unit="fraction",
                   direction="none", description=f"share of training steps whose gradient norm was clipped ({ds}, {m}, {arm})")
            if (ds, m) == (hd, hm):
                mf.add(f"train_accuracy.{ds}.{m}.{arm}", a(ds, m, arm, "train_accuracy"), unit="fraction",
                       direction="higher", description=f"accuracy on the training images and the labels fitted "
                                                       f"(permuted for shuffled arms) ({ds}, {m}, {arm})")
            for pert in PERTURBATIONS:
                for meth in methods_of(m):
                    mf.add(f"attr_topk.{pert}.{ds}.{m}.{meth}.{arm}", v(ds, m, arm, pert, meth), unit="fraction",
                           direction="higher", description=f"top-k intersection, clean vs {pert} ({ds}, {m}, {meth}, {arm})")
        for pert in PERTURBATIONS:
            for meth in methods_of(m):
                for st in STATS:
                    gain = v(ds, m, "sgd_high", pert, meth, st) - v(ds, m, "gd", pert, meth, st)
                    key = "attr_gain" if st == "topk" else f"attr_gain_{st}"
                    mf.add(f"{key}.{pert}.{ds}.{m}.{meth}", gain, unit=st, direction="higher",
                           description=f"{st} under {pert}: high-noise SGD minus full-batch GD ({ds}, {m}, {meth})")
                rho = []
                for s in seeds:  # over the arms that learned; NaN with fewer than 3
                    g = arm_table.loc[(s, ds, m)].loc[sweep_roles]
                    keep = [arm for arm in sweep_roles if bool(g.loc[arm, "learned"])]
                    rho.append(float(stats.spearmanr([float(g.loc[arm, "noise_scale"]) for arm in keep],
                                                     [float(r.loc[(s, ds, m, arm, pert, meth), "topk"]) for arm in keep]
                                                     ).statistic) if len(keep) >= 3 else float("nan"))
                mf.add(f"noise_scale_rank_corr.{pert}.{ds}.{m}.{meth}", rho, unit="Spearman", direction="higher",
                       description=f"Spearman, across the sweep and GD arms that learned, of SGD noise scale lr/B vs top-k intersection "
                                   f"under {pert} ({ds}, {m}, {meth})")
        if m.startswith("vit"):
            for pert in PERTURBATIONS:
                d = (v(ds, m, "sgd_high", pert, "rollout") - v(ds, m, "gd", pert, "rollout")) - (
                    v(ds, m, "sgd_high", pert, "saliency") - v(ds, m, "gd", pert, "saliency"))
                mf.add(f"attn_minus_grad_gain.{pert}.{ds}.{m}", d, unit="fraction", direction="none",
                       description=f"SGD gain (top-k under {pert}) of attention rollout minus that of saliency ({ds}, {m})")
    for pert in PERTURBATIONS:
        for meth in METHODS:
            mf.add(f"attr_gain_shuffled.{pert}.{hd}.{hm}.{meth}",
                   v(hd, hm, "shuffled_sgd", pert, meth) - v(hd, hm, "shuffled_gd", pert, meth), unit="fraction",
                   direction="none", description=f"label-shuffled control: SGD minus GD top-k under {pert} ({meth})")
    for ds in {d for d, _ in workloads(p)}:
        mf.add(f"attr_topk_chance.{ds}", [p["k"] / np.prod(SHAPES[ds])] * len(seeds), unit="fraction",
               direction="none", description=f"top-k intersection of two independent random rankings (k/d, {ds})")
        first = next(m for d, m in workloads(p) if d == ds)
        mf.add(f"accuracy_majority.{ds}", [float(t[(t.seed == s) & (t.dataset == ds) & (t.model == first)]
                                                 ["majority_rate"].iloc[0]) for s in seeds],
               unit="fraction", direction="none", description=f"test accuracy of always predicting the most "
                                                              f"frequent training class ({ds})")
        mf.add(f"train_majority.{ds}", [float(t[(t.seed == s) & (t.dataset == ds) & (t.model == first)]
                                              ["train_majority_rate"].iloc[0]) for s in seeds],
               unit="fraction", direction="none", description=f"training accuracy of always predicting the most "
                                                              f"frequent training class, shuffled labels alike ({ds})")
    links = [curvature_link(arm_table.loc[s].reset_index(), sweep_roles, p["null_permutations"], s) for s in seeds]
    mf.add("curvature_link_spearman", [x[0] for x in links], unit="Spearman", direction="higher",
           description="mean over (data set, model) of the Spearman correlation across the sweep and GD arms "
                       "between parameter sharpness and input-Hessian norm")
    mf.add("diverged_arms", [float((~np.isfinite(arm_table.loc[s, "sharpness"])).sum()) for s in seeds], unit="count",
           direction="lower", description="arms (all workloads) whose training diverged (non-finite loss curvature); "
                                          "left out of the curvature link, their attributions are meaningless")
    task_arms = arm_table[~arm_table.index.get_level_values("role").str.startswith("shuffled")]
    mf.add("unlearned_arms", [float((~task_arms.loc[s, "learned"].astype(bool)).sum()) for s in seeds], unit="count",
           direction="lower", description=f"arms (all workloads, label-shuffled arms excluded) with test accuracy at "
                                          f"most {LEARNED} of the way from the majority class to perfect; left out of "
                                          f"the curvature link, the noise-scale rank correlations and the lam tuning")
    mf.add("curvature_link_null_q95", [x[1] for x in links], unit="Spearman", direction="none",
           description="95th percentile of the same statistic with sharpness/curvature pairings shuffled")
    lams = [f"gd_reg{x:g}" for x in p["reg_lams"]]
    gd_t = a(hd, hm, "gd", "train_seconds")
    mf.add("train_time_ratio.sgd_high_vs_gd", a(hd, hm, "sgd_high", "train_seconds") / gd_t, unit="ratio",
           direction="lower", timing=True, description=f"training wall time, high-noise SGD / GD, same steps ({hd}, {hm})")
    per_example = (a(hd, hm, "sgd_high", "train_seconds") / a(hd, hm, "sgd_high", "batch")) / (gd_t / a(hd, hm, "gd", "batch"))
    mf.add("train_time_per_example_ratio.sgd_high_vs_gd", per_example, unit="ratio", direction="lower", timing=True,
           description=f"training wall time per example processed, high-noise SGD / GD ({hd}, {hm}; CPU per-step "
                       f"overheads of small batches included)")
    reg = np.mean([a(hd, hm, lam, "train_seconds") for lam in lams], axis=0)
    mf.add("train_time_ratio.explicit_reg_vs_gd", reg / gd_t, unit="ratio", direction="lower", timing=True,
           description=f"training wall time, GD + input-gradient penalty / GD, same steps, mean over lam ({hd}, {hm})")
    gd_f = a(hd, hm, "gd", "flops_per_example")
    mf.add("flops_per_example_ratio.sgd_high_vs_gd", a(hd, hm, "sgd_high", "flops_per_example") / gd_f, unit="ratio",
           direction="lower", description=f"FLOPs per training example of one step (profiler count), high-noise SGD / "
                                           f"GD ({hd}, {hm})")
    mf.add("flops_per_example_ratio.explicit_reg_vs_gd",
           np.mean([a(hd, hm, lam, "flops_per_example") for lam in lams], axis=0) / gd_f, unit="ratio",
           direction="lower", description=f"FLOPs per training example of one step, GD + input-gradient penalty "
                                           f"(double backprop) / GD, mean over lam ({hd}, {hm})")
    for arm in ("sgd_high", "gd", *lams):
        mf.add(f"train_seconds.{hd}.{hm}.{arm}", a(hd, hm, arm, "train_seconds"), unit="s", direction="lower",
               timing=True, description=f"training wall time ({hd}, {hm}, {arm})")
    # the explicit regulariser's lam: the most robust saliency under attack among the lams whose model learned;
    # ties within the selection's standard error go to the grid's middle lam (the arm's default)
    picked = {k: [] for k in ("lam", "interior", "tie", "topk", "acc", "n")}
    for s in seeds:
        ok = [bool(arm_table.loc[(s, hd, hm, lam), "learned"]) for lam in lams]
        scores = [float(r.loc[(s, hd, hm, lam, "attack", "saliency"), "topk"]) for lam in lams]
        pick = pick_reg_lam(p["reg_lams"], ok, scores, p["n_eval"])
        picked["n"].append(float(sum(ok)))
        for k in ("lam", "interior", "tie", "topk"):
            picked[k].append(pick[k])
        picked["acc"].append(float(arm_table.loc[(s, hd, hm, f"gd_reg{pick['lam']:g}"), "accuracy"])
                             if pick["lam"] == pick["lam"] else float("nan"))
    mf.add("explicit_reg_lam", picked["lam"], unit="", direction="none",
           description="tuned lam of the explicit regulariser (most robust saliency under attack among lams that learned)")
    mf.add("explicit_reg_learned_lams", picked["n"], unit="count", direction="none",
           description="lams of the grid whose regularised model learned (eligible for the pick)")
    mf.add("tuned_interior.explicit_reg", picked["interior"], unit="flag", direction="none",
           description="1 when the tuned lam is interior to the lam grid")
    mf.add("tuning_tie.explicit_reg", picked["tie"], unit="flag", direction="none",
           description="1 when the tie rule (within the selection's standard error) moved the pick to the default lam")
    mf.add(f"attr_topk.attack.{hd}.{hm}.saliency.explicit_reg", picked["topk"], unit="fraction", direction="higher",
           description=f"top-k intersection under attack of the tuned explicit regulariser ({hd}, {hm}, saliency; "
                       f"tuned on these evaluation images, an optimistic figure)")
    mf.add(f"accuracy.{hd}.{hm}.explicit_reg", picked["acc"], unit="fraction", direction="higher",
           description=f"test accuracy of the tuned explicit regulariser ({hd}, {hm})")
    mf.add("attack_linf_minus_eps", [float(t[t.seed == s]["attack_linf"].max()) - p["eps"] for s in seeds],
           unit="", direction="lower", description="largest L-inf size of an attack perturbation minus eps (<= 0)")
    return mf


def summary_table(table: pd.DataFrame, p: dict) -> pd.DataFrame:
    t = table.assign(role=table["arm"].map(roles(p)))
    return t.groupby(["dataset", "model", "role", "arm", "noise_scale", "perturbation", "method", "seed"],
                     as_index=False)[["topk", "spearman", "kendall", "accuracy", "train_accuracy",
                                      "sharpness", "input_curvature", "train_seconds", "clipped_share"]].mean()


def run(job) -> None:
    p = job.params
    seeds = [int(s) for s in p["seeds"]]
    table = pd.concat([read_parquet(f) for f in job.input.values()], ignore_index=True)
    write_parquet(job.output.summary, summary_table(table, p))
    build_metrics(table, p, seeds).write(job.output.metrics)
