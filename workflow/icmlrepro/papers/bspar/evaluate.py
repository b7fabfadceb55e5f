"""Every arm on the test photos (never trained on), per seed; metrics.json.

Every seed has its own task draw; every arm (trained, fixed and the oracle) is scored on that seed's test tasks.
Trained arms run greedily (argmax, at most ``horizon`` tool calls). Per image: mean CIEDE2000 (the judge's metric),
CIE94 and SSIM (held-out metrics no arm is trained or tuned on) to the hidden target, success (distance under the
judge's threshold, without judge noise), tool calls, and whether the whole edit sequence left the image
perceptually unchanged (CIEDE2000 from source to result under the JND; an unedited image counts as unchanged, so
doing nothing earns no credit). The reward model's held-out AUC: on the test tasks, the final states of rollouts
sampled from the instruction prior plus each source and each hidden target, labelled by the noise-free judge.
Alignment: on random edit sequences over the test tasks (drawn per seed), the correlation of each reward signal
with the true progress of an edit (its decrease of the distance to the target): the dense proxy's increment and
the B-Spar reward model's increment of posterior acceptance. Training-time metrics come from the train curves.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_torch, write_npz, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed

from . import data as D
from icmlrepro.core.tuning import at_grid_edge

from .agent import STATE_DIM, new_policy, observe, rollout
from .baselines import GlobalRegenerator, oracle, prompt_recipe, recipe_calls, tune_recipe
from .reward_model import BayesLogistic
from .tools import JND, N_ACTIONS, apply_actions, delta_e, delta_e94, features, proxy_quality, ssim

BASELINES = ("identity", "prompt", "aigc")  # untrained; "oracle" is the ceiling, not a baseline
COMPETITORS = ("dense", "sparse", "prompt", "aigc")  # what B-Spar is compared with ("best baseline")
STEPWISE = ("dense", "sparse", "prompt")  # competitors that retouch by a sequence of tool calls (AIGC: one global edit)


def score(final: torch.Tensor, test: dict, threshold: float) -> dict[str, np.ndarray]:
    """Per image: distances to the hidden target, success, and whether the result is perceptually the source."""
    d = delta_e(final, test["target"])
    return {"delta_e": d, "delta_e94": delta_e94(final, test["target"]), "ssim": ssim(final, test["target"]),
            "success": (d < threshold).astype(float),
            "negligible": (delta_e(final, test["source"]) < JND).astype(float)}


def greedy_arm(policy, test: dict, s: dict) -> dict[str, np.ndarray]:
    """Greedy rollouts with per-image tool calls and inference time."""
    t0 = time.perf_counter()
    ro = rollout(policy, test["source"], test["instr"], s["horizon"], None)
    ms = 1000 * (time.perf_counter() - t0) / len(test["source"])
    out = score(ro.final, test, s["judge_threshold"])
    acts = torch.cat([a[(a != 0) & m] for a, m in zip(ro.actions, ro.alive)])
    out |= {"edits": ro.n_edits().astype(float), "infer_ms": np.full(len(ro.final), ms)}
    return out | {"_final": ro.final, "_actions": acts}


def action_entropy(actions: torch.Tensor) -> float:
    """Entropy (nats) of the marginal distribution of executed tool calls: 0 = one action for everything."""
    if len(actions) == 0:
        return 0.0
    p = torch.bincount(actions, minlength=N_ACTIONS).double()
    p = p[p > 0] / p.sum()
    return float(-(p * p.log()).sum())


def alignment(test: dict, rm: BayesLogistic | None, s: dict, seed: int) -> dict[str, float]:
    """Correlation of per-edit reward signals with true progress on uniformly random edit sequences."""
    g = torch.Generator().manual_seed(derive_seed(seed, "bspar", "alignment"))
    x, tgt, instr = test["source"], test["target"], test["instr"]
    f0 = features(x)
    gains, bayes, truth = [], [], []
    for t in range(s["horizon"]):
        a = torch.randint(1, N_ACTIONS, (len(x),), generator=g)
        y = apply_actions(x, a)
        truth.append(delta_e(x, tgt) - delta_e(y, tgt))
        gains.append((proxy_quality(y) - proxy_quality(x)).numpy())
        if rm is not None:
            st = [state(instr, z, f0) for z in (x, y)]
            bayes.append((rm.predict(st[1]) - rm.predict(st[0])).numpy())
        x = y
    truth = np.concatenate(truth)
    out = {"proxy": float(np.corrcoef(np.concatenate(gains), truth)[0, 1])}
    if rm is not None:
        out["bayes"] = float(np.corrcoef(np.concatenate(bayes), truth)[0, 1])
    return out


def state(instr: torch.Tensor, x: torch.Tensor, f0: torch.Tensor) -> torch.Tensor:
    """What the reward model rates: instruction, statistics of ``x`` and their change since the source."""
    return observe(instr, features(x), f0, 0, 1)[:, :STATE_DIM]


def reward_model_auc(test: dict, rm: BayesLogistic, s: dict, seed: int) -> float:
    """ROC AUC of the reward model's P(accept) for the noise-free judge's verdict on held-out edits: on the test
    tasks (photos never trained on), every source, every hidden target and the final states of
    ``auc_rollouts`` rollouts sampled from the instruction prior."""
    from sklearn.metrics import roc_auc_score

    g = torch.Generator().manual_seed(derive_seed(seed, "bspar", "auc"))
    src, instr = test["source"], test["instr"]
    f0 = features(src)
    finals = [src, test["target"]] + [rollout(lambda o: torch.zeros(len(o), N_ACTIONS), src, instr, s["horizon"], g,
                                              prior_weight=1.0).final for _ in range(s["auc_rollouts"])]
    p = torch.cat([rm.predict(state(instr, x, f0)) for x in finals]).numpy()
    y = np.concatenate([delta_e(x, test["target"]) < s["judge_threshold"] for x in finals])
    return float(roc_auc_score(y, p))


def curve_stats(curve: pd.DataFrame) -> dict[str, float]:
    n = int(curve["iteration"].max()) + 1
    it = curve["iteration"]
    val = curve.dropna(subset=["val_success"])
    return {"zero_reward_share_first_half": float(1 - curve[it < n / 2]["accept_rate"].mean()),
            "early_entropy": float(curve[(it >= 0.15 * n) & (it < 0.25 * n)]["entropy"].mean()),
            "late_success_std": float(val[val["iteration"] >= 0.75 * n]["val_success"].std(ddof=0)),
            "final_val_success": float(val["val_success"].iloc[-1])}


def evaluate(job, s: dict):
    tasks = D.load(job.input.tasks)
    rows, curves, align, examples, tuning = [], [], [], {}, {}
    tune = D.draw(tasks, "tune")
    recipe, recipe_scores = tune_recipe(tune["val"], s["judge_threshold"], s["judge_noise"],
                                        np.random.default_rng(derive_seed(D.TUNE_SEED, "bspar", "recipe")),
                                        s["horizon"])
    saved = {arm: read_torch(job.input[arm]) for arm in s["arms"]}
    for arm in s["arms"]:
        tuning[arm] = {"lr": saved[arm]["lr"], "scores": saved[arm]["lr_scores"]}
    for seed in s["seeds"]:
        dr = D.draw(tasks, seed)
        test = dr["test"]
        n_ex = min(4, len(test["source"]))
        first = seed == s["seeds"][0]
        if first:
            examples["source"], examples["target"] = test["source"][:n_ex].numpy(), test["target"][:n_ex].numpy()
        fixed = {"identity": (test["source"], 0.0),
                 "prompt": (prompt_recipe(test["source"], test["instr"], *recipe), float(recipe_calls(recipe))),
                 "aigc": (GlobalRegenerator().fit(dr["train"])(test["source"], test["instr"]), 1.0)}
        final, oracle_edits = oracle(test["source"], test["target"], s["horizon"])
        fixed["oracle"] = (final, oracle_edits.astype(float))
        for arm, (img, edits) in fixed.items():
            sc = score(img, test, s["judge_threshold"])
            sc["edits"] = np.broadcast_to(edits, (len(img),)).astype(float)
            rows.append(pd.DataFrame(sc).assign(arm=arm, seed=seed, image=np.arange(len(img))))
            if first:
                examples[arm] = img[:n_ex].numpy()
        for arm in s["arms"]:
            r = saved[arm]["runs"][seed]
            policy = new_policy(s["hidden"], 0)
            policy.load_state_dict(r["state"])
            out = greedy_arm(policy.eval(), test, s)
            if first:
                examples[arm] = out["_final"][:n_ex].numpy()
            ent = action_entropy(out.pop("_actions"))
            out.pop("_final")
            rows.append(pd.DataFrame(out).assign(arm=arm, seed=seed, image=np.arange(len(out["success"])),
                                                 action_entropy=ent))
            curves.append(pd.DataFrame(r["curve"]).assign(arm=arm, seed=seed, train_seconds=r["train_seconds"]))
            if arm == "bspar":
                rm = BayesLogistic.from_state(r["reward_model"])
                align.append({"seed": seed, "auc": reward_model_auc(test, rm, s, seed)} | alignment(test, rm, s, seed))
    per_image = pd.concat(rows, ignore_index=True)
    return per_image, pd.concat(curves, ignore_index=True), pd.DataFrame(align), examples, recipe, recipe_scores, tuning


def smoothed_rate(success: np.ndarray) -> float:
    """(k + 1/2) / (n + 1): a success rate that is never 0, so relative gains stay finite (design choice)."""
    return (success.sum() + 0.5) / (len(success) + 1)


CURVE_METRICS = {  # curve_stats key: (unit, direction, description)
    "zero_reward_share_first_half": ("share of rollouts", "lower",
                                     "training rollouts without an accept bit, first half of training"),
    "early_entropy": ("nats", "higher", "policy entropy on visited states at 15-25% of training"),
    "late_success_std": ("success rate std", "lower",
                         "std of the validation success over the last quarter of training"),
    "final_val_success": ("share of validation images", "higher", "validation success at the end of training"),
}
SMOOTHED = "rates (k+1/2)/(n+1)"


def trained_arm_metrics(mf: MetricsFile, arm: str, per_image: pd.DataFrame, curves: pd.DataFrame, seeds) -> None:
    """Edit statistics, collapse, inference time and training-curve statistics of one trained arm."""
    sub = per_image[per_image["arm"] == arm].groupby("seed")
    first = sub[["action_entropy", "infer_ms"]].first()
    mf.add(f"action_entropy.{arm}", [float(first.loc[sd, "action_entropy"]) for sd in seeds], unit="nats",
           direction="higher", description=f"arm {arm}: entropy of the executed tool-call distribution (0 = collapse)")
    mf.add(f"infer_ms.{arm}", [float(first.loc[sd, "infer_ms"]) for sd in seeds], unit="ms per image",
           direction="lower", timing=True, description=f"arm {arm}: greedy inference wall time per test image")
    cs = {sd: curve_stats(curves[(curves["arm"] == arm) & (curves["seed"] == sd)]) for sd in seeds}
    for key, (unit, direction, text) in CURVE_METRICS.items():
        mf.add(f"{key}.{arm}", [cs[sd][key] for sd in seeds], unit=unit, direction=direction,
               description=f"arm {arm}: {text}")
    secs = curves[curves["arm"] == arm].groupby("seed")["train_seconds"].first()
    mf.add(f"train_seconds.{arm}", [float(secs.loc[sd]) for sd in seeds], unit="s", direction="lower", timing=True,
           description=f"arm {arm}: training wall time (equal iterations in every trained arm)")


def build_metrics(per_image: pd.DataFrame, curves: pd.DataFrame, align: pd.DataFrame, s: dict,
                  recipe: tuple, recipe_scores: list, tuning: dict) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("bspar", s["scale"], replicate="seed", replicates=seeds)
    mean = per_image.groupby(["arm", "seed"])[["delta_e", "delta_e94", "ssim", "success", "edits", "negligible"]].mean()

    def per_seed(arm, col):
        return np.array([float(mean.loc[(arm, sd), col]) for sd in seeds])

    units = {"success": ("share of test images", "higher"), "delta_e": ("mean CIEDE2000", "lower"),
             "delta_e94": ("mean CIE94 (held out)", "lower"), "ssim": ("SSIM (held out)", "higher"),
             "edits": ("tool calls per image", "lower")}
    for arm in [*s["arms"], *BASELINES, "oracle"]:
        for col, (unit, direction) in units.items():
            mf.add(f"{col}.{arm}", per_seed(arm, col), unit=unit, direction=direction,
                   description=f"arm {arm}: {col} to the hidden expert target on the test photos (greedy)")
    for arm in [*s["arms"], *BASELINES]:
        mf.add(f"negligible_share.{arm}", per_seed(arm, "negligible"), unit="share of test images", direction="lower",
               description=f"arm {arm}: share of test images whose whole edit sequence changes the image by less "
                           f"than {JND} mean CIEDE2000 (the JND); an unedited image counts (no credit for no edit)")
    for arm in s["arms"]:
        trained_arm_metrics(mf, arm, per_image, curves, seeds)
        grid = tuning[arm]["scores"]
        mf.add(f"lr.{arm}", [float(tuning[arm]["lr"])] * len(seeds), unit="Adam learning rate", direction="none",
               description=f"arm {arm}: learning rate picked on the tuning draw from {sorted(grid)} "
                           f"(scores {[round(grid[k], 3) for k in sorted(grid)]})")
        mf.add(f"lr_at_grid_edge.{arm}", [float(at_grid_edge(tuning[arm]["lr"], grid))] * len(seeds), unit="flag",
               direction="none", description=f"arm {arm}: 1 if its tuned learning rate is an end of the grid")
    comp = [a for a in COMPETITORS if a in set(per_image["arm"])]
    succ = np.stack([per_seed(a, "success") for a in comp])
    mf.add("success.best_baseline", succ.max(0), unit="share of test images", direction="higher",
           description=f"per seed, the highest success among {', '.join(comp)}")
    mf.add("ssim.best_baseline", np.stack([per_seed(a, "ssim") for a in comp]).max(0), unit="SSIM (held out)",
           direction="higher", description=f"per seed, the highest SSIM among {', '.join(comp)}")
    mf.add("delta_e94.best_baseline", np.stack([per_seed(a, "delta_e94") for a in comp]).min(0),
           unit="mean CIE94 (held out)", direction="lower",
           description=f"per seed, the lowest mean CIE94 distance among {', '.join(comp)}")
    if "bspar" in s["arms"]:
        comparison_metrics(mf, per_image, align, comp, succ.argmax(0), per_seed, seeds)
    grid_pos = recipe_scores.index(max(recipe_scores))
    mf.add("prompt_recipe_at_grid_edge", [float(grid_pos in (0, len(recipe_scores) - 1))] * len(seeds), unit="flag",
           direction="none", description=f"1 if the tuned prompt recipe {recipe} is at an end of its grid")
    return mf


def comparison_metrics(mf: MetricsFile, per_image: pd.DataFrame, align: pd.DataFrame, comp: list,
                       best: np.ndarray, per_seed, seeds) -> None:
    """B-Spar against the AIGC-style arm and the per-seed best competitor; reward-truth alignment."""
    arms = [a for a in [*comp, "bspar", "sparse"] if a in set(per_image["arm"])]
    rate = {a: np.array([smoothed_rate(per_image[(per_image["arm"] == a) & (per_image["seed"] == sd)]["success"]
                                       .to_numpy()) for sd in seeds]) for a in arms}
    for arm in ("bspar", "sparse"):
        if arm in rate:
            mf.add(f"success_rel_gain.{arm}_vs_aigc", rate[arm] / rate["aigc"] - 1, unit="relative gain in success",
                   direction="higher",
                   description=f"(success of {arm} / success of the AIGC-style arm) - 1, {SMOOTHED}")
    mf.add("success_rel_gain.bspar_vs_best_baseline", rate["bspar"] / np.stack([rate[a] for a in comp]).max(0) - 1,
           unit="relative gain in success", direction="higher",
           description=f"(success of bspar / best competitor's success) - 1, {SMOOTHED}")
    best_edits = np.array([per_seed(comp[b], "edits")[i] for i, b in enumerate(best)])
    mf.add("edits_ratio.bspar_vs_best_baseline", per_seed("bspar", "edits") / np.maximum(best_edits, 1e-9),
           unit="ratio of tool calls", direction="lower",
           description="tool calls per image of bspar / those of the per-seed most successful competitor")
    for arm in STEPWISE:  # the per-seed most successful competitor is a fixed recipe whose call count it chose
        if arm in set(per_image["arm"]):
            mf.add(f"edits_ratio.bspar_vs_{arm}", per_seed("bspar", "edits") / np.maximum(per_seed(arm, "edits"), 1e-9),
                   unit="ratio of tool calls", direction="lower",
                   description=f"tool calls per image of bspar / those of {arm}")
    al = align.set_index("seed")
    mf.add("rm_auc.bspar", [float(al.loc[sd, "auc"]) for sd in seeds], unit="ROC AUC", direction="higher",
           description="B-Spar reward model: AUC of P(accept) for the noise-free judge on held-out edits (test photos: "
                       "sources, hidden targets, instruction-prior rollouts)")
    for key, col, text in (("bspar", "bayes", "B-Spar reward model: corr(change of posterior acceptance"),
                           ("proxy", "proxy", "dense proxy: corr(no-reference quality gain")):
        mf.add(f"reward_truth_corr.{key}", [float(al.loc[sd, col]) for sd in seeds], unit="Pearson r",
               direction="higher", description=f"{text}, true decrease of CIEDE2000 to target) over random edits")


def run(job) -> None:
    s = job.params
    per_image, curves, align, examples, recipe, recipe_scores, tuning = evaluate(job, s)
    write_parquet(job.output.per_image, per_image)
    write_parquet(job.output.curves, curves)
    write_npz(job.output.examples, examples)
    build_metrics(per_image, curves, align, s, recipe, recipe_scores, tuning).write(job.output.metrics)
