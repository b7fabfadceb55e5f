"""Every arm on the test photos (never trained on), per seed; metrics.json.

Trained arms run greedily (argmax, at most ``horizon`` tool calls). Per image: mean CIEDE2000 and SSIM to the
hidden target, success (distance under the judge's threshold, without judge noise), tool calls, and per
executed edit its perceptual size (CIEDE2000 between the images before and after it: negligible below the JND).
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
from .agent import STATE_DIM, new_policy, observe, rollout
from .baselines import GlobalRegenerator, oracle, prompt_recipe, tune_recipe
from .reward_model import BayesLogistic
from .tools import JND, N_ACTIONS, STOP, apply_actions, delta_e, features, proxy_quality, ssim

BASELINES = ("identity", "prompt", "aigc")  # untrained; "oracle" is the ceiling, not a baseline
COMPETITORS = ("dense", "sparse", "prompt", "aigc")  # what B-Spar is compared with ("best baseline")


def score(final: torch.Tensor, target: torch.Tensor, threshold: float) -> dict[str, np.ndarray]:
    d = delta_e(final, target)
    return {"delta_e": d, "ssim": ssim(final, target), "success": (d < threshold).astype(float)}


def greedy_arm(policy, test: dict, s: dict) -> dict[str, np.ndarray]:
    """Greedy rollouts with per-image tool calls, negligible-edit counts and inference time."""
    t0 = time.perf_counter()
    ro = rollout(policy, test["source"], test["instr"], s["horizon"], None, keep_images=True)
    ms = 1000 * (time.perf_counter() - t0) / len(test["source"])
    out = score(ro.final, test["target"], s["judge_threshold"])
    negl = np.zeros(len(ro.final))
    acts = []
    for t, (a, m) in enumerate(zip(ro.actions, ro.alive)):
        edit = ((a != STOP) & m).numpy()
        size = delta_e(ro.images[t], ro.images[t + 1])
        negl += edit & (size < JND)
        acts.append(a[torch.from_numpy(edit)])
    acts = torch.cat(acts) if acts else torch.zeros(0, dtype=torch.long)
    out |= {"edits": ro.n_edits().astype(float), "negligible": negl, "infer_ms": np.full(len(negl), ms)}
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
            st = [observe(instr, features(z), f0, 0, 1)[:, :STATE_DIM] for z in (x, y)]
            bayes.append((rm.predict(st[1]) - rm.predict(st[0])).numpy())
        x = y
    truth = np.concatenate(truth)
    out = {"proxy": float(np.corrcoef(np.concatenate(gains), truth)[0, 1])}
    if rm is not None:
        out["bayes"] = float(np.corrcoef(np.concatenate(bayes), truth)[0, 1])
    return out


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
    train, test = D.split(tasks, "train"), D.split(tasks, "test")
    rows, curves, align, examples = [], [], [], {}
    n_ex = min(4, len(test["source"]))
    examples["source"], examples["target"] = test["source"][:n_ex].numpy(), test["target"][:n_ex].numpy()
    fixed = {"identity": test["source"]}
    recipe, recipe_scores = tune_recipe(train, s["judge_threshold"], s["judge_noise"],
                                        np.random.default_rng(derive_seed(s["seeds"][0], "bspar", "recipe")))
    fixed["prompt"] = prompt_recipe(test["source"], test["instr"], *recipe)
    fixed["aigc"] = GlobalRegenerator().fit(train)(test["source"], test["instr"])
    fixed["oracle"], oracle_edits = oracle(test["source"], test["target"], s["horizon"])
    fixed_scores = {}
    for arm, img in fixed.items():
        fixed_scores[arm] = score(img, test["target"], s["judge_threshold"])
        edits = {"identity": 0.0, "prompt": recipe[1] * 2.0, "aigc": 1.0}.get(arm)
        fixed_scores[arm]["edits"] = oracle_edits.astype(float) if arm == "oracle" else np.full(len(img), edits)
        examples[arm] = img[:n_ex].numpy()
    runs = {arm: read_torch(job.input[arm])["runs"] for arm in s["arms"]}
    for seed in s["seeds"]:
        for arm, sc in fixed_scores.items():
            rows.append(pd.DataFrame(sc).assign(arm=arm, seed=seed, image=np.arange(len(sc["success"]))))
        for arm in s["arms"]:
            r = runs[arm][seed]
            policy = new_policy(s["hidden"], 0)
            policy.load_state_dict(r["state"])
            out = greedy_arm(policy.eval(), test, s)
            if seed == s["seeds"][0]:
                examples[arm] = out["_final"][:n_ex].numpy()
            ent = action_entropy(out.pop("_actions"))
            out.pop("_final")
            rows.append(pd.DataFrame(out).assign(arm=arm, seed=seed, image=np.arange(len(out["success"])),
                                                 action_entropy=ent))
            curves.append(pd.DataFrame(r["curve"]).assign(arm=arm, seed=seed, train_seconds=r["train_seconds"]))
            if arm == "bspar":
                rm = BayesLogistic.from_state(r["reward_model"])
                align.append({"seed": seed} | alignment(test, rm, s, seed))
    per_image = pd.concat(rows, ignore_index=True)
    return per_image, pd.concat(curves, ignore_index=True), pd.DataFrame(align), examples, recipe, recipe_scores


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
    negl = sub["negligible"].sum() / sub["edits"].sum().clip(lower=1)
    first = sub[["action_entropy", "infer_ms"]].first()
    mf.add(f"negligible_edit_share.{arm}", [float(negl.loc[sd]) for sd in seeds], unit="share of edits",
           direction="lower", description=f"arm {arm}: share of executed edits with CIEDE2000 change < {JND} (JND)")
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
                  recipe: tuple, recipe_scores: list) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("bspar", s["scale"], replicate="seed", replicates=seeds)
    mean = per_image.groupby(["arm", "seed"])[["delta_e", "ssim", "success", "edits"]].mean()

    def per_seed(arm, col):
        return np.array([float(mean.loc[(arm, sd), col]) for sd in seeds])

    units = {"success": ("share of test images", "higher"), "delta_e": ("mean CIEDE2000", "lower"),
             "ssim": ("SSIM", "higher"), "edits": ("tool calls per image", "lower")}
    for arm in [*s["arms"], *BASELINES, "oracle"]:
        for col, (unit, direction) in units.items():
            mf.add(f"{col}.{arm}", per_seed(arm, col), unit=unit, direction=direction,
                   description=f"arm {arm}: {col} to the hidden expert target on the test photos (greedy)")
    for arm in s["arms"]:
        trained_arm_metrics(mf, arm, per_image, curves, seeds)
    comp = [a for a in COMPETITORS if a in set(per_image["arm"])]
    succ = np.stack([per_seed(a, "success") for a in comp])
    mf.add("success.best_baseline", succ.max(0), unit="share of test images", direction="higher",
           description=f"per seed, the highest success among {', '.join(comp)}")
    mf.add("ssim.best_baseline", np.stack([per_seed(a, "ssim") for a in comp]).max(0), unit="SSIM",
           direction="higher", description=f"per seed, the highest SSIM among {', '.join(comp)}")
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
    al = align.set_index("seed")
    for key, col, text in (("bspar", "bayes", "B-Spar reward model: corr(change of posterior acceptance"),
                           ("proxy", "proxy", "dense proxy: corr(no-reference quality gain")):
        mf.add(f"reward_truth_corr.{key}", [float(al.loc[sd, col]) for sd in seeds], unit="Pearson r",
               direction="higher", description=f"{text}, true decrease of CIEDE2000 to target) over random edits")


def run(job) -> None:
    s = job.params
    per_image, curves, align, examples, recipe, recipe_scores = evaluate(job, s)
    write_parquet(job.output.per_image, per_image)
    write_parquet(job.output.curves, curves)
    write_npz(job.output.examples, examples)
    build_metrics(per_image, curves, align, s, recipe, recipe_scores).write(job.output.metrics)
