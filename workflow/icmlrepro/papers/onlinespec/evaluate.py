"""Stage ``onlinespec.evaluate``: metrics.json from the per-seed stream tables.

Acceptance length = tokens emitted per verification round over the whole stream (greedy, exact).
Measured speedup = target-only decode time / speculative decode time on the same timed prompts
(timings). Cost-model speedup (OSD): (1 - a^(g+1)) / ((1 - a)(c g + 1)) with a the per-token
acceptance rate and c the measured draft/target step-time ratio. Dynamic regret of an arm: sum over
chunks of its online loss minus the loss of the chunk's hindsight-fitted comparator. The
regret-acceleration link: Spearman correlation over (arm, chunk) between per-chunk regret and
acceptance length, per seed. "Best OnlineSPEC arm" = the better of optimistic and ensemble by
acceptance length, per seed. The relative speedup per task family is the cost model's (ratio of
acceptance lengths: every round costs the same draft and target steps), since the maximum over
families of measured wall-clock ratios would mostly select timing noise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from icmlrepro.core.io import read_json, read_parquet
from icmlrepro.core.metrics import MetricsFile

from .learners import ARMS

ONLINESPEC = ("optimistic", "ensemble")


def per_seed(df: pd.DataFrame, costs: dict, gamma: int) -> dict:
    out = {}
    g = df.groupby("arm")
    acc_len = g.tokens.sum() / g.rounds.sum()
    speed = g.target_seconds.sum() / g.spec_seconds.sum()
    c = costs["draft_step_seconds"] / costs["target_step_seconds"]
    for arm in ARMS:
        rows = df[df.arm == arm]
        a = float((rows.accept_rate * rows.tokens).sum() / rows.tokens.sum())  # per-token acceptance rate
        out[f"accept_len.{arm}"] = float(acc_len[arm])
        out[f"speedup.{arm}"] = float(speed[arm])
        out[f"cost_model_speedup.{arm}"] = (1 - a ** (gamma + 1)) / ((1 - a) * (c * gamma + 1)) if a < 1 else np.nan
        out[f"dynamic_regret.{arm}"] = float((rows.loss - rows.comparator_loss).sum())
    out["draft_target_cost_ratio"] = c
    best = max(ONLINESPEC, key=lambda a: out[f"accept_len.{a}"])
    out["speedup_best_onlinespec_minus_offline"] = out[f"speedup.{best}"] - out["speedup.offline"]
    out["speedup_best_onlinespec_minus_osd"] = out[f"speedup.{best}"] - out["speedup.osd"]
    # per family, with rounds of equal cost (same target, draft and gamma): the ratio of acceptance
    # lengths; a maximum over families of measured wall-clock ratios would mostly pick timing noise
    fam = df.groupby(["family", "arm"])[["tokens", "rounds"]].sum()
    fam_len = (fam.tokens / fam.rounds).unstack("arm")
    out["max_rel_speedup_onlinespec_vs_offline"] = float((fam_len[best] / fam_len["offline"] - 1).max())
    out["accept_len_optimistic_minus_ogd"] = out["accept_len.optimistic"] - out["accept_len.ogd"]
    out["accept_len_ensemble_minus_ogd"] = out["accept_len.ensemble"] - out["accept_len.ogd"]
    learners = df[df.arm != "offline"]
    out["spearman_regret_vs_acceptance_length"] = float(
        spearmanr(learners.loss - learners.comparator_loss, learners.acceptance_length).statistic)
    return out


UNITS = {  # metric prefix -> (unit, direction, timing, description)
    "accept_len.": ("tokens/round", "higher", False, "tokens emitted per verification round over the stream (greedy)"),
    "speedup.": ("x", "higher", True, "measured wall-clock speedup over target-only decoding (timed prompts)"),
    "cost_model_speedup.": ("x", "higher", True, "OSD cost model from acceptance rate and measured cost ratio"),
    "dynamic_regret.": ("nats", "lower", False, "sum over chunks of online loss minus the hindsight comparator's"),
    "draft_target_cost_ratio": ("ratio", "none", True, "draft step time / target step time"),
    "speedup_best_onlinespec_minus": ("x", "higher", True, "measured speedup of the better of optimistic/ensemble minus the baseline's"),
    "max_rel_speedup": ("fraction", "higher", False, "max over task families of acceptance-length ratio best/offline - 1 (cost model)"),
    "accept_len_": ("tokens/round", "higher", False, "acceptance length difference over the stream"),
    "spearman_": ("rho", "lower", False, "Spearman correlation over (arm, chunk) of per-chunk regret and acceptance length"),
}


def run(job) -> None:
    p = job.params
    seeds = list(p["seeds"])
    values = []
    for table, costs in zip(job.input.tables, job.input.costs):
        values.append(per_seed(read_parquet(table), read_json(costs), p["gamma"]))
    mf = MetricsFile("onlinespec", p["scale"], replicate="seed", replicates=seeds)
    for name in sorted(values[0]):
        unit, direction, timing, desc = next(v for k, v in UNITS.items() if name.startswith(k))
        mf.add(name, [v[name] for v in values], unit=unit, direction=direction, timing=timing,
               description=desc + (f" ({name.split('.', 1)[1]})" if "." in name else ""))
    mf.write(job.output.metrics)
