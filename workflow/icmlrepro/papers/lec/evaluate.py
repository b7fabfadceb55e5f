"""Random calibration/test splits: LEC, its baselines and two-model routing, at every alpha.

For each seed, ``n_splits`` random calibration/test splits of the pool are drawn. Each method
picks a threshold on the calibration part; on the test part we count accepted predictions and
accepted errors. The selection-conditioned risk P(err = 1 | accepted) is estimated by pooling
over splits (accepted errors / accepted), which is the quantity LEC's guarantee is about; the
mean of per-split risks is kept too (figures). Per-seed values go to metrics.json.
"""

from __future__ import annotations

import time
from itertools import product

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed

from .data import ERROR_LAWS, exact_risk, synthetic_scores
from .thresholds import ABSTAIN, Calibration, ltt_grid, naive_routing_thresholds, routing_thresholds

METHODS = ("lec", "ucb_hfd", "ucb_clp", "sgr", "ltt")
BASELINES = METHODS[1:]
ROUTING = ("routing_joint", "routing_naive")


def threshold(cal: Calibration, method: str, alpha: float, p) -> float:
    if method == "lec":
        return cal.lec(alpha, p["margin"])
    if method == "ucb_hfd":
        return cal.ucb(alpha, p["delta"], "hoeffding")
    if method == "ucb_clp":
        return cal.ucb(alpha, p["delta"], "clopper_pearson")
    if method == "sgr":
        return cal.sgr(alpha, p["delta"])
    if method == "ltt":
        return cal.ltt(alpha, p["delta"], ltt_grid(p["ltt_grid"]))
    raise ValueError(f"unknown method {method!r}")


def _count(accepted: np.ndarray, err: np.ndarray) -> dict:
    return {"n_test": int(err.size), "n_acc": int(accepted.sum()), "n_err_acc": int(err[accepted].sum()),
            "n_correct": int((err == 0).sum()), "n_correct_acc": int((accepted & (err == 0)).sum())}


def split(seed: int, k: int, n: int, n_cal: int) -> tuple[np.ndarray, np.ndarray]:
    """Calibration and test indices of split ``k`` of a seed."""
    perm = np.random.default_rng(derive_seed(seed, "lec", "split", k)).permutation(n)
    return perm[:n_cal], perm[n_cal:]


def largest_feasible(u, err, alpha: float, margin: float) -> float:
    """LEC's threshold by exhaustive search (every calibration score tried, O(n^2)): an independent
    check of the prefix-count implementation that the pipeline uses."""
    cands = np.unique(u)
    slack = (u[None, :] <= cands[:, None]).astype(float) @ (np.asarray(err, float) - alpha)
    ok = slack <= -margin + 1e-9
    return float(cands[ok].max()) if ok.any() else ABSTAIN


def retention_maximizing_agreement(preds: dict[str, pd.DataFrame], seed: int, p) -> float:
    """Share of (base model, alpha) on the seed's first split where LEC's threshold is the largest
    feasible calibration score found by exhaustive search."""
    n = len(next(iter(preds.values())))
    c, _ = split(seed, 0, n, int(round(p["cal_fraction"] * n)))
    hits = []
    for df in preds.values():
        u, err = df["uncertainty"].to_numpy()[c], df["error"].to_numpy()[c]
        cal = Calibration(u, err)
        hits += [cal.lec(alpha, p["margin"]) == largest_feasible(u, err, alpha, p["margin"]) for alpha in p["alphas"]]
    return float(np.mean(hits))


def evaluate_seed(preds: dict[str, pd.DataFrame], seed: int, p) -> pd.DataFrame:
    """One row per (split, alpha, system, method) with the test counts."""
    models = list(preds)
    idx = preds[models[0]]["idx"].to_numpy()
    for m in models[1:]:
        if not np.array_equal(preds[m]["idx"].to_numpy(), idx):
            raise ValueError(f"lec seed {seed}: models {models[0]} and {m} saw different pools")
    u = {m: preds[m]["uncertainty"].to_numpy() for m in models}
    e = {m: preds[m]["error"].to_numpy().astype(np.int64) for m in models}
    n = idx.size
    n_cal = int(round(p["cal_fraction"] * n))
    pa, pb = p["routing"]["primary"], p["routing"]["secondary"]
    rows = []
    for k in range(p["n_splits"]):
        c, t = split(seed, k, n, n_cal)
        cals = {m: Calibration(u[m][c], e[m][c]) for m in models}
        for alpha in p["alphas"]:
            for m, method in product(models, METHODS):
                lam = threshold(cals[m], method, alpha, p)
                rows.append({"split": k, "alpha": alpha, "system": m, "method": method, "lam": lam,
                             "feasible": lam != ABSTAIN, **_count(u[m][t] <= lam, e[m][t])})
            for system, fn in (("routing_joint", routing_thresholds), ("routing_naive", naive_routing_thresholds)):
                kw = {"grid": p["routing_grid"]} if system == "routing_joint" else {}
                la, lb = fn(u[pa][c], e[pa][c], u[pb][c], e[pb][c], alpha, p["margin"], **kw)
                acc_a = u[pa][t] <= la
                acc_b = ~acc_a & (u[pb][t] <= lb)
                err = np.where(acc_a, e[pa][t], e[pb][t])  # the answer the system returns
                rows.append({"split": k, "alpha": alpha, "system": system, "method": "lec", "lam": la,
                             "feasible": la != ABSTAIN or lb != ABSTAIN, **_count(acc_a | acc_b, err)})
    df = pd.DataFrame(rows)
    df.insert(0, "seed", seed)
    return df


def synthetic_margins(p, alpha: float) -> dict[str, float]:
    """The LEC variants of the synthetic check: the configured margin, the derivation's tight 1 - alpha,
    and no margin (the plain empirical constraint: the control without the finite-sample correction)."""
    return {"lec": p["margin"], "lec_tight": 1 - alpha, "lec_nomargin": 0.0}


def synthetic_check(seed: int, p) -> pd.DataFrame:
    """Exact selection-conditioned risk of LEC on i.i.d. synthetic scores with known error laws.

    With u ~ U(0, 1) and P(err | u) = c u^k (``data.ERROR_LAWS``), a threshold lam in [0, 1] accepts
    with probability lam and errs on accepted inputs with probability c lam^k / (k + 1), so over
    calibration draws the risk is exact (no test sampling noise). Laws whose worst-case risk
    c / (k + 1) exceeds every alpha make the check able to fail: any threshold near 1 violates them.
    Run for each law in ``synthetic_laws`` and calibration size in ``synthetic_n_cal``.
    """
    rows = []
    for law, n_cal in product(p["synthetic_laws"], p["synthetic_n_cal"]):
        rng = np.random.default_rng(derive_seed(seed, "lec", "synthetic", law, n_cal))
        keys = [(alpha, name, margin) for alpha in p["alphas"] for name, margin in synthetic_margins(p, alpha).items()]
        alphas, margins = [k[0] for k in keys], [k[2] for k in keys]
        draws = np.array([Calibration(*synthetic_scores(n_cal, rng, law)).lec_many(alphas, margins)
                          for _ in range(p["synthetic_splits"])]).clip(0.0, 1.0)
        lams = {(alpha, name): draws[:, i] for i, (alpha, name, _) in enumerate(keys)}
        for (alpha, name), ls in sorted(lams.items()):
            rows.append({"seed": seed, "law": law, "n_cal": n_cal, "alpha": alpha, "method": name,
                         "risk": exact_risk(ls, law), "acceptance": float(ls.mean())})
    return pd.DataFrame(rows)


def pooled(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Pool test counts over splits: risk = accepted errors / accepted, retention, power, feasibility."""
    g = df.groupby(keys, sort=True)
    out = g[["n_test", "n_acc", "n_err_acc", "n_correct", "n_correct_acc"]].sum()
    out["risk"] = (out["n_err_acc"] / out["n_acc"]).where(out["n_acc"] > 0)
    out["retention"] = out["n_acc"] / out["n_test"]
    out["power"] = out["n_correct_acc"] / out["n_correct"]
    out["feasibility"] = g["feasible"].mean()
    return out.reset_index()


def within_level(row: pd.Series, alpha: float) -> bool:
    """Whether a method kept its level in a (seed, model, alpha) cell: pooled test risk <= alpha, or nothing
    accepted (no risk). Retention is compared only where both methods did: retention bought by breaking the level
    is not a gain, and breaking the level is judged by the risk claims, not counted twice here."""
    risk = row["risk"]
    return bool(np.isnan(risk) or risk <= alpha)


def retention_gains(s: pd.DataFrame, seeds: list[int], alphas, models, base: str) -> tuple[list[float], list[float]]:
    """Per seed, LEC's retention minus ``base``'s averaged over (alpha, base model) cells: over all cells, and over
    the cells where both kept their level (NaN where none did). ``s`` is the pooled summary indexed by
    (seed, alpha, system, method)."""
    raw, level = [], []
    for seed in seeds:
        cells = [(a, s.loc[(seed, a, m, "lec")], s.loc[(seed, a, m, base)]) for a in alphas for m in models]
        raw.append(float(np.mean([lec["retention"] - b["retention"] for _, lec, b in cells])))
        kept = [lec["retention"] - b["retention"] for a, lec, b in cells if within_level(lec, a) and within_level(b, a)]
        level.append(float(np.mean(kept)) if kept else float("nan"))
    return raw, level


def build_metrics(summary: pd.DataFrame, synth: pd.DataFrame, p, seeds: list[int], seconds: list[float],
                  agreement: list[float]) -> MetricsFile:
    mf = MetricsFile("lec", p["scale"], replicate="seed", replicates=seeds)
    mf.add("lec_threshold_is_largest_feasible", agreement, unit="fraction", direction="higher",
           description="share of (base model, alpha) on the first split where LEC's threshold equals the "
                       "largest feasible calibration score found by exhaustive search")
    s = summary.set_index(["seed", "alpha", "system", "method"]).sort_index()
    models = list(p["models"])

    def per_seed(alpha, system, method, col):
        return [float(s.loc[(seed, alpha, system, method), col]) for seed in seeds]

    for alpha in p["alphas"]:
        a = f"@{alpha:g}"
        for m, method in product(models, METHODS):
            key = f"{method}.{m}{a}"
            mf.add(f"risk_minus_alpha.{key}", np.array(per_seed(alpha, m, method, "risk")) - alpha,
                   unit="fraction", direction="lower",
                   description=f"pooled test risk among accepted minus alpha ({method}, {m}, alpha={alpha:g})")
            for col in ("retention", "power", "feasibility"):
                mf.add(f"{col}.{key}", per_seed(alpha, m, method, col), unit="fraction", direction="higher",
                       description=f"{col} ({method}, {m}, alpha={alpha:g})")
        risks = np.array([per_seed(alpha, m, "lec", "risk") for m in models])
        with np.errstate(all="ignore"):
            worst = np.where(np.all(np.isnan(risks), axis=0), np.nan, np.nanmax(risks, axis=0))
        mf.add(f"lec_max_risk_minus_alpha{a}", worst - alpha, unit="fraction", direction="lower",
               description="largest pooled test risk of LEC over the base models minus alpha "
                           "(a model on which LEC abstains everywhere cannot violate the level)")
        for system in ROUTING:
            mf.add(f"risk_minus_alpha.{system}{a}", np.array(per_seed(alpha, system, "lec", "risk")) - alpha,
                   unit="fraction", direction="lower", description=f"{system}: system risk minus alpha")
            mf.add(f"retention.{system}{a}", per_seed(alpha, system, "lec", "retention"),
                   unit="fraction", direction="higher", description=f"{system}: share of test inputs answered")
        joint = np.array(per_seed(alpha, "routing_joint", "lec", "retention"))
        for role, m in (("primary", p["routing"]["primary"]), ("secondary", p["routing"]["secondary"])):
            mf.add(f"routing_retention_gain_vs_{role}{a}", joint - np.array(per_seed(alpha, m, "lec", "retention")),
                   unit="fraction", direction="higher",
                   description=f"joint-routing retention minus LEC on the {role} model ({m}) alone")
        for name, law, n_cal in product(("lec", "lec_tight", "lec_nomargin"), p["synthetic_laws"],
                                        p["synthetic_n_cal"]):
            sel = synth[(synth.alpha == alpha) & (synth.method == name) & (synth.law == law) & (synth.n_cal == n_cal)]
            r = sel.set_index("seed").loc[seeds, "risk"]
            mf.add(f"synthetic_risk_minus_alpha.{name}.{law}.n{n_cal}{a}", r.to_numpy() - alpha, unit="fraction",
                   direction="lower", description=f"exact risk minus alpha on i.i.d. synthetic scores, "
                                                  f"law {law}, n_cal={n_cal} ({name})")
    for name, law, n_cal in product(("lec", "lec_tight", "lec_nomargin"), p["synthetic_laws"], p["synthetic_n_cal"]):
        sel = synth[(synth.method == name) & (synth.law == law) & (synth.n_cal == n_cal)].copy()
        sel["excess"] = sel["risk"] - sel["alpha"]
        # the worst alpha per seed; an alpha at which the rule abstained in every draw has no risk
        # (NaN) and cannot violate the level; all-NaN stays NaN
        worst = sel.groupby("seed")["excess"].max().reindex(seeds)
        mf.add(f"synthetic_max_risk_minus_alpha.{name}.{law}.n{n_cal}", worst.to_numpy(), unit="fraction",
               direction="lower", description=f"largest exact risk minus alpha over the alpha grid, law {law}, "
                                              f"n_cal={n_cal} ({name})")
    for base in BASELINES:
        gains, level_gains = retention_gains(s, seeds, p["alphas"], models, base)
        mf.add(f"lec_retention_gain_vs_{base}", gains, unit="fraction", direction="higher",
               description=f"LEC retention minus {base} retention, averaged over alphas and base models")
        mf.add(f"lec_level_retention_gain_vs_{base}", level_gains, unit="fraction", direction="higher",
               description=f"LEC minus {base} retention over the (alpha, base model) cells of the seed where both "
                           "kept their level (pooled test risk <= alpha)")
    mf.add("eval_seconds", seconds, unit="s", direction="lower", timing=True,
           description="wall time of the split evaluation per seed")
    return mf


def run(job) -> None:
    p = job.params
    seeds = [int(s) for s in p["seeds"]]
    frames, synth, seconds, agreement = [], [], [], []
    for seed in seeds:
        t0 = time.perf_counter()
        preds = {m: read_parquet(job.input[f"{m}_seed{seed}"]) for m in p["models"]}
        frames.append(evaluate_seed(preds, seed, p))
        agreement.append(retention_maximizing_agreement(preds, seed, p))
        synth.append(synthetic_check(seed, p))
        seconds.append(time.perf_counter() - t0)
    splits = pd.concat(frames, ignore_index=True)
    summary = pooled(splits, ["seed", "alpha", "system", "method"])
    synth_df = pd.concat(synth, ignore_index=True)
    write_parquet(job.output.splits, splits)
    write_parquet(job.output.summary, summary)
    write_parquet(job.output.synthetic, synth_df)
    build_metrics(summary, synth_df, p, seeds, seconds, agreement).write(job.output.metrics)
