"""Per-seed metrics from the per-(family, seed) measurement tables.

Role names used in metric keys: ``sgd_high`` is ``sweep[0]`` (the high-noise SGD arm fixed in the
config), ``gd`` full-batch GD at the same learning rate and steps, ``shuffled_sgd`` / ``shuffled_gd``
the same two on permuted labels, ``gd_reg<lam>`` the explicit input-gradient regulariser. The gain of
SGD is ``sgd_high - gd`` (paired: same seed, initialisation, steps and evaluation inputs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed
from icmlrepro.core.tuning import at_grid_edge

from .data import SHAPES
from .models import FAMILIES
from .robustness import METHODS

PERTURBATIONS = ("attack", "noise")
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


def curvature_link(arm_table: pd.DataFrame, sweep_roles: list[str], n_perm: int, seed: int) -> tuple[float, float]:
    """Mean over (data set, model) of the Spearman correlation, across the sweep and GD arms, between
    sharpness and input curvature; and the 95th percentile of the same statistic with the pairing
    shuffled within each group (the null in which the two curvatures are unrelated)."""
    groups = [g.set_index("role").loc[sweep_roles] for _, g in arm_table.groupby(["dataset", "model"])]
    # an arm whose training diverged has no curvature: its pair is left out; a group needs 3 pairs
    groups = [g[np.isfinite(g["sharpness"]) & np.isfinite(g["input_curvature"])] for g in groups]
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


def build_metrics(table: pd.DataFrame, p: dict, seeds: list[int]) -> MetricsFile:
    mf = MetricsFile("attribution_sgd", p["scale"], replicate="seed", replicates=seeds)
    role = roles(p)
    t = table.assign(role=table["arm"].map(role))
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
                noise = [t_.noise_scale for t_ in arm_table.loc[(seeds[0], ds, m)].loc[sweep_roles].itertuples()]
                rho = [stats.spearmanr(noise, [float(r.loc[(s, ds, m, arm, pert, meth), "topk"]) for arm in sweep_roles]
                                       ).statistic for s in seeds]
                mf.add(f"noise_scale_rank_corr.{pert}.{ds}.{m}.{meth}", rho, unit="Spearman", direction="higher",
                       description=f"Spearman, across the sweep and GD, of SGD noise scale lr/B vs top-k intersection "
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
    links = [curvature_link(arm_table.loc[s].reset_index(), sweep_roles, p["null_permutations"], s) for s in seeds]
    mf.add("curvature_link_spearman", [x[0] for x in links], unit="Spearman", direction="higher",
           description="mean over (data set, model) of the Spearman correlation across the sweep and GD arms "
                       "between parameter sharpness and input-Hessian norm")
    mf.add("diverged_arms", [float((~np.isfinite(arm_table.loc[s, "sharpness"])).sum()) for s in seeds], unit="count",
           direction="lower", description="arms (all workloads) whose training diverged (non-finite loss curvature); "
                                          "left out of the curvature link, their attributions are meaningless")
    mf.add("curvature_link_null_q95", [x[1] for x in links], unit="Spearman", direction="none",
           description="95th percentile of the same statistic with sharpness/curvature pairings shuffled")
    gd_t = a(hd, hm, "gd", "train_seconds")
    mf.add("train_time_ratio.sgd_high_vs_gd", a(hd, hm, "sgd_high", "train_seconds") / gd_t, unit="ratio",
           direction="lower", timing=True, description=f"training wall time, high-noise SGD / GD, same steps ({hd}, {hm})")
    reg = np.mean([a(hd, hm, f"gd_reg{x:g}", "train_seconds") for x in p["reg_lams"]], axis=0)
    mf.add("train_time_ratio.explicit_reg_vs_gd", reg / gd_t, unit="ratio", direction="lower", timing=True,
           description=f"training wall time, GD + input-gradient penalty / GD, same steps, mean over lam ({hd}, {hm})")
    for arm in ("sgd_high", "gd", *(f"gd_reg{x:g}" for x in p["reg_lams"])):
        mf.add(f"train_seconds.{hd}.{hm}.{arm}", a(hd, hm, arm, "train_seconds"), unit="s", direction="lower",
               timing=True, description=f"training wall time ({hd}, {hm}, {arm})")
    best = [int(np.argmax([float(r.loc[(s, hd, hm, f"gd_reg{x:g}", "attack", "saliency"), "topk"]) for x in p["reg_lams"]]))
            for s in seeds]
    mf.add("explicit_reg_best_lam_at_grid_edge", [float(at_grid_edge(p["reg_lams"][b], p["reg_lams"])) for b in best],
           unit="flag", direction="none",
           description="1 when the lam with the most robust saliency under attack is an end of the lam grid")
    mf.add("attack_linf_minus_eps", [float(t[t.seed == s]["attack_linf"].max()) - p["eps"] for s in seeds],
           unit="", direction="lower", description="largest L-inf size of an attack perturbation minus eps (<= 0)")
    return mf


def summary_table(table: pd.DataFrame, p: dict) -> pd.DataFrame:
    t = table.assign(role=table["arm"].map(roles(p)))
    return t.groupby(["dataset", "model", "role", "arm", "noise_scale", "perturbation", "method", "seed"],
                     as_index=False)[["topk", "spearman", "kendall", "accuracy", "sharpness", "input_curvature",
                                      "train_seconds"]].mean()


def run(job) -> None:
    p = job.params
    seeds = [int(s) for s in p["seeds"]]
    table = pd.concat([read_parquet(f) for f in job.input.values()], ignore_index=True)
    write_parquet(job.output.summary, summary_table(table, p))
    build_metrics(table, p, seeds).write(job.output.metrics)
