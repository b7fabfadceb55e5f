"""Offline chunk quality and closed-loop MuJoCo rollouts of every arm, per seed; metrics.json.

Offline (the seed's held-out demonstrations): for each test (observation, expert chunk) pair one chunk is
sampled per policy; deviation = MAE to the expert chunk (m); within-chunk acceleration and jerk magnitudes (mean,
p95, max). Reference rows: the expert chunk itself, the expert at 15 Hz interpolated back to 60 Hz
(what the representation alone does), the expert autoencoded by the VAE (what reconstruction alone does,
for every downsampling factor of the ablation), the 60 Hz action policy's chunk passed through the
VAE (the control of the latent claim: the VAE as a post-filter instead of a space to learn in), and the
60 Hz action policy's chunk subsampled to 15 Hz and interpolated back (the control of the 15 Hz claim: the
interpolation as a post-filter on the same policy, instead of a policy that learned 15 Hz actions).

Closed loop (fresh tasks per seed, never demonstrated): success rate, pause share, boundary gap D0 and
jerk at chunk switches, jerk of the executed action stream (mean / p95 / max), completion time; the
expert (ceiling) and a policy that never moves (trivial reference) beside the arms.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_torch, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed, seed_everything

from . import data as rtr_data
from . import sim
from .chunks import (acc_jerk, active_ticks, boundary_gap, boundary_jerk, hold_60, interp_60,
                     pause_mask, summary, to_low_rate)
from .execute import Schedule, expert_rollout, rollout
from .model import Denoiser
from .policy import RATIO, Normalizer, features, reference, sample
from .train import codec_for, load_vae

# closed-loop arms: name -> (policy, rate, mode, delay setting)
ARMS = {
    "action60.sync": ("action60", "60", "sync", "delay"),
    "action60.async": ("action60", "60", "async", "delay"),
    "action60.async_te": ("action60", "60", "te", "delay"),
    "action60.async_rtc": ("action60", "60", "rtc", "delay"),
    "action15_hold.async": ("action15", "hold", "async", "delay"),
    "action15_interp.sync": ("action15", "interp", "sync", "delay"),
    "action15_interp.async": ("action15", "interp", "async", "delay"),
    "latent.sync": ("latent", "60", "sync", "delay"),
    "latent.async": ("latent", "60", "async", "delay"),
    "latent.async_te": ("latent", "60", "te", "delay"),
    "latent.async_rtr": ("latent", "60", "rtr", "delay"),
    "latent.delay0": ("latent", "60", "async", 0),
    "latent.delay0_te": ("latent", "60", "te", 0),
    "latent.delay0_rtr": ("latent", "60", "rtr", 0),
}
REFERENCES = ("expert", "hold")
OFFLINE = ("expert", "expert15_interp", "vae_recon", "action60", "action60_vaefilter", "action60_sub15_interp",
           "action15_hold", "action15_interp", "latent")


class Loaded:
    """A seed's VAE, normalisers and trained policies, with chunk samplers."""

    def __init__(self, job, s: dict, seed: int):
        self.s, self.seed = s, seed
        self.vae_path = job.input[f"vae_seed{seed}"]
        self.vae, self.act_norm, self.obs_norm = load_vae(self.vae_path, s, seed)
        self.models, self.codecs = {}, {}
        for kind in s["policies"]:
            ck = read_torch(job.input[f"{kind}_seed{seed}"])
            m = Denoiser(ck["dim"], len(self.obs_norm.mean), s["hidden"], s["layers"])
            m.load_state_dict(ck["state"])
            self.models[kind] = (m.eval(), ck["dim"])
            z = Normalizer.from_state(ck["z_norm"]) if ck["z_norm"] else None
            self.codecs[kind] = codec_for(kind, self.vae, self.act_norm, z)
        self.gen = torch.Generator().manual_seed(derive_seed(seed, "rtr", "sampling"))

    def chunk(self, kind: str, rate: str, obs: np.ndarray, prefix: np.ndarray | None = None) -> np.ndarray:
        """One sampled 60 Hz chunk (n, H, A) per observation; ``prefix`` inpaints the first actions (RTC-like)."""
        model, dim = self.models[kind]
        known = None
        if prefix is not None and prefix.shape[1] > 0:
            if kind != "action60":
                raise ValueError("inpainting is defined for the 60 Hz action policy only")
            mask = np.zeros(dim, bool)
            mask[: prefix.shape[1] * prefix.shape[2]] = True
            vals = np.zeros((len(obs), dim), np.float32)
            vals[:, mask] = self.act_norm(prefix - reference(obs)[:, None]).reshape(len(obs), -1)
            known = (mask, vals)
        x = sample(model, self.cond(obs), dim, self.s, self.gen, known)
        out = self.codecs[kind].decode(x, reference(obs))
        if kind == "action15":
            out = hold_60(out, RATIO) if rate == "hold" else interp_60(out, RATIO)
        return out

    def cond(self, obs: np.ndarray) -> np.ndarray:
        return self.obs_norm(features(obs)).astype(np.float32)

    def refine(self, prefix: np.ndarray, chunk: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Reuse-then-Refine: committed prefix + new chunk from there on, encoded and decoded by the VAE."""
        combined = np.concatenate([prefix, chunk[:, prefix.shape[1]:]], 1)
        return self.vae_pass(combined, reference(obs))

    def vae_pass(self, chunk: np.ndarray, ref: np.ndarray, vae=None) -> np.ndarray:
        """Encode (posterior mean) and decode a physical chunk, relative to ``ref`` as the VAE was trained."""
        vae = vae or self.vae
        with torch.no_grad():
            x = vae.reconstruct(torch.as_tensor(self.act_norm(chunk - ref[:, None]).astype(np.float32))).numpy()
        return self.act_norm.inverse(x) + ref[:, None]


def heldout_chunks(job, s: dict, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The seed's held-out (observation, expert chunk) pairs, every ``offline_stride`` ticks while the task is
    unfinished."""
    return rtr_data.task_chunks(job.input[f"steps_seed{seed}"], job.input[f"episodes_seed{seed}"], "test",
                                s["horizon"], s["offline_stride"])


def smooth_row(pred: np.ndarray, ref: np.ndarray, fps: int) -> dict:
    acc, jerk = acc_jerk(pred, fps)
    row = {"deviation": float(np.abs(pred - ref).mean())}
    row |= {f"acc_{k}": v for k, v in summary(acc).items()} | {f"jerk_{k}": v for k, v in summary(jerk).items()}
    return row


def offline_rows(L: Loaded, obs: np.ndarray, expert: np.ndarray, job, s: dict) -> list[dict]:
    ref = reference(obs)
    preds = {"expert": expert, "expert15_interp": interp_60(to_low_rate(expert, RATIO), RATIO),
             "vae_recon": L.vae_pass(expert, ref)}
    preds["action60"] = L.chunk("action60", "60", obs)
    preds["action60_vaefilter"] = L.vae_pass(preds["action60"], ref)
    preds["action60_sub15_interp"] = interp_60(to_low_rate(preds["action60"], RATIO), RATIO)
    preds["latent"] = L.chunk("latent", "60", obs)
    knots = L.codecs["action15"].decode(sample(L.models["action15"][0], L.cond(obs), L.models["action15"][1], s,
                                               L.gen), ref)
    preds["action15_hold"], preds["action15_interp"] = hold_60(knots, RATIO), interp_60(knots, RATIO)
    for f in s["ablation_downsample"]:
        vae_f = load_vae(L.vae_path, s, L.seed, f)[0]
        preds[f"vae_recon.x{f}"] = L.vae_pass(expert, ref, vae_f)
    return [{"seed": L.seed, "arm": k} | smooth_row(v, expert, sim.FPS) for k, v in preds.items()]


def closed_row(r: dict, arm: str, seed: int, s: dict) -> dict:
    """Per-arm, per-seed closed-loop figures pooled over its episodes."""
    n, T = r["executed"].shape[:2]
    paused = active = paused_free = active_free = 0
    gaps, bjerks, jerks = [], [], []
    free = ~np.asarray(r["held"], bool)  # ticks not scheduled as holds
    for e in range(n):
        m = pause_mask(r["tips"][e], int(r["done_tick"][e]), sim.FPS, s["pause_speed"])
        paused += int(m.sum())
        n_active = active_ticks(T, int(r["done_tick"][e]))
        active += n_active
        paused_free += int((m & free).sum())
        active_free += int(free[:n_active].sum())
        gaps.append(boundary_gap(r["executed"][e], r["switches"]))
        bjerks.append(boundary_jerk(r["executed"][e], r["switches"], sim.FPS))
        jerks.append(acc_jerk(r["executed"][e], sim.FPS)[1])
    gaps, bjerks, jerks = (np.concatenate(x) if len(x) else np.zeros(0) for x in (gaps, bjerks, jerks))
    done = r["done_tick"][r["success"]]
    js = summary(jerks)
    return {"seed": seed, "arm": arm, "success": float(r["success"].mean()), "pause_share": paused / max(active, 1),
            "pause_share_unscheduled": paused_free / max(active_free, 1), "inferences": float(r["inferences"]),
            "d0": float(gaps.mean()) if len(gaps) else np.nan,
            "boundary_jerk": float(bjerks.mean()) if len(bjerks) else np.nan,
            "jerk_mean": js["mean"], "jerk_p95": js["p95"], "jerk_max": js["max"],
            "completion_s": float(done.mean() / sim.FPS) if len(done) else np.nan, "switches": len(r["switches"])}


def closed_loop(L: Loaded, s: dict) -> tuple[list[dict], dict]:
    seed, T = L.seed, s["episode_ticks"]
    tasks = sim.sample_tasks(np.random.default_rng(derive_seed(seed, "rtr", "eval_tasks")), s["n_eval_episodes"])
    rows, traces = [], {}
    runs = {"expert": expert_rollout(tasks, T),
            "hold": rollout(tasks, lambda ob, _p: np.repeat(ob[:, None, 8:10], s["horizon"], 1),
                            Schedule("async", s["delay"], s["execute"], s["horizon"]), T)}
    for arm, (kind, rate, mode, dkey) in ARMS.items():
        if kind not in L.models:
            continue
        d = s["delay"] if dkey == "delay" else dkey
        sch = Schedule(mode, d, s["execute"], s["horizon"], s["te_period"], s["te_m"])
        pol = lambda ob, prefix, kind=kind, rate=rate: L.chunk(kind, rate, ob, prefix)  # noqa: E731
        runs[arm] = rollout(tasks, pol, sch, T, refine=L.refine)
    for arm, r in runs.items():
        rows.append(closed_row(r, arm, seed, s))
        traces[arm] = r
    return rows, traces


def trace_table(traces: dict, seed: int, episodes: int) -> pd.DataFrame:
    """Executed actions, fingertip and puck of the first episodes (for the trajectory figure)."""
    parts = []
    for arm, r in traces.items():
        T = r["executed"].shape[1]
        for e in range(min(episodes, len(r["executed"]))):
            sw = np.zeros(T, bool)
            sw[[t for t in r["switches"] if t < T]] = True
            parts.append(pd.DataFrame({"seed": seed, "arm": arm, "episode": e, "t": np.arange(T),
                                       "act_x": r["executed"][e, :, 0], "act_y": r["executed"][e, :, 1],
                                       "tip_x": r["tips"][e, 1:, 0], "tip_y": r["tips"][e, 1:, 1],
                                       "puck_x": r["pucks"][e, 1:, 0], "puck_y": r["pucks"][e, 1:, 1],
                                       "goal_x": r["goal"][e, 0], "goal_y": r["goal"][e, 1], "switch": sw,
                                       "done_tick": int(r["done_tick"][e])}))
    return pd.concat(parts, ignore_index=True)


def diff(tab: pd.DataFrame, a: str, b: str, col: str, seeds) -> list[float]:
    t = tab.set_index(["arm", "seed"])[col]
    return [float(t.loc[(a, sd)] - t.loc[(b, sd)]) for sd in seeds]


def build_metrics(off: pd.DataFrame, closed: pd.DataFrame, s: dict) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("rtr", s["scale"], replicate="seed", replicates=seeds)
    o, c = off.set_index(["arm", "seed"]), closed.set_index(["arm", "seed"])
    units = {"deviation": "m", "acc": "m/s^2", "jerk": "m/s^3"}
    for arm in sorted(off["arm"].unique()):
        for col in [x for x in off.columns if x not in ("seed", "arm")]:
            mf.add(f"offline.{arm}.{col}", [float(o.loc[(arm, sd), col]) for sd in seeds],
                   unit=units[col.split("_")[0]], direction="lower",
                   description=f"held-out chunks, {arm}: {col.replace('_', ' ')} (per-step magnitudes pooled over chunks)")
    cunits = {"success": ("share", "higher"), "pause_share": ("share", "lower"),
              "pause_share_unscheduled": ("share", "lower"), "inferences": ("policy calls per episode", "none"),
              "d0": ("m", "lower"),
              "boundary_jerk": ("m/s^3", "lower"), "jerk_mean": ("m/s^3", "lower"), "jerk_p95": ("m/s^3", "lower"),
              "jerk_max": ("m/s^3", "lower"), "completion_s": ("s", "lower"), "switches": ("switches", "none")}
    for arm in sorted(closed["arm"].unique()):
        for col, (unit, direction) in cunits.items():
            mf.add(f"closed.{arm}.{col}", [float(c.loc[(arm, sd), col]) for sd in seeds], unit=unit,
                   direction=direction, description=f"closed-loop MuJoCo rollouts, {arm}: {col.replace('_', ' ')}")

    def add(name, tab, a, b, col, unit, desc):
        mf.add(name, diff(tab, a, b, col, seeds), unit=unit, direction="higher", description=desc)

    add("jerk_action60_minus_action15_interp", off, "action60", "action15_interp", "jerk_mean", "m/s^3",
        "mean within-chunk jerk: 60 Hz action policy minus 15 Hz policy interpolated to 60 Hz")
    add("jerk_expert60_minus_expert15_interp", off, "expert", "expert15_interp", "jerk_mean", "m/s^3",
        "the same difference on the expert's chunks (what the 15 Hz representation alone changes on smooth chunks)")
    add("jerk_action60_minus_action60_sub15_interp", off, "action60", "action60_sub15_interp", "jerk_mean", "m/s^3",
        "control: 60 Hz action policy minus its own chunks subsampled to 15 Hz and interpolated (post-filter)")
    for a, b, what in (("action60", "action15_interp", "60 Hz action policy minus 15 Hz policy interpolated"),
                       ("action60", "action60_sub15_interp", "control: 60 Hz action policy minus its own chunks "
                                                             "subsampled to 15 Hz and interpolated")):
        add(f"deviation_{a}_minus_{b}", off, a, b, "deviation", "m", f"held-out chunks, deviation: {what}")
    for col, unit in (("jerk_mean", "m/s^3"), ("deviation", "m")):
        key = col.split("_")[0]
        add(f"{key}_action60_minus_latent", off, "action60", "latent", col, unit,
            f"held-out chunks, {col}: 60 Hz action policy minus latent policy")
        add(f"{key}_action60_minus_action60_vaefilter", off, "action60", "action60_vaefilter", col, unit,
            f"control, {col}: 60 Hz action policy minus the same chunks passed through the VAE (post-filter)")
    for col, unit, label in (("d0", "m", "boundary_gap"), ("boundary_jerk", "m/s^3", "boundary_jerk")):
        for other, oname in (("async", "naive"), ("async_te", "te")):
            add(f"{label}_{oname}_minus_rtr", closed, f"latent.{other}", "latent.async_rtr", col, unit,
                f"latent policy, async (delay {s['delay']} ticks): {col} with {oname} switching minus Reuse-then-Refine")
            add(f"{label}_{oname}_minus_rtr@delay0", closed, f"latent.delay0{other[5:]}", "latent.delay0_rtr", col,
                unit, f"control: the same difference with zero inference delay (RTR reuses nothing)")
        add(f"{label}_rtc_minus_rtr", closed, "action60.async_rtc", "latent.async_rtr", col, unit,
            f"{col}: RTC-like inpainting (60 Hz action policy) minus latent policy with RTR")
    add("pause_share_baseline_minus_rtr", closed, "action60.sync", "latent.async_rtr", "pause_share", "share",
        "pause share: 60 Hz action policy, synchronous, minus latent policy, asynchronous with RTR")
    add("pause_share_baseline_minus_latent_sync", closed, "action60.sync", "latent.sync", "pause_share", "share",
        "control: the same baseline minus the latent policy executed synchronously (no async, no RTR)")
    add("pause_share_unscheduled_baseline_minus_rtr", closed, "action60.sync", "latent.async_rtr",
        "pause_share_unscheduled", "share", "pause share on ticks not scheduled as holds: 60 Hz action policy, "
        "synchronous, minus latent policy, asynchronous with RTR")
    add("pause_share_unscheduled_baseline_minus_latent_sync", closed, "action60.sync", "latent.sync",
        "pause_share_unscheduled", "share", "control: the same (scheduled holds excluded) minus the latent "
        "policy executed synchronously (no async, no RTR)")
    add("jerk_p95_baseline_minus_rtr", closed, "action60.sync", "latent.async_rtr", "jerk_p95", "m/s^3",
        "p95 jerk of the executed actions: 60 Hz action policy, sync, minus latent policy, async with RTR")
    add("jerk_p95_baseline_minus_latent_async_naive", closed, "action60.sync", "latent.async", "jerk_p95", "m/s^3",
        "control: the same baseline minus the latent policy, async with naive switching (no RTR)")
    add("success_rtr_minus_baseline", closed, "latent.async_rtr", "action60.sync", "success", "share",
        "task success: latent policy, async with RTR, minus 60 Hz action policy, sync")
    return mf


def run(job) -> None:
    s = job.params
    off, closed, traces = [], [], []
    timing = []
    for seed in s["seeds"]:
        obs, expert = heldout_chunks(job, s, seed)
        seed_everything(derive_seed(seed, "rtr", "eval"))
        L = Loaded(job, s, seed)
        t0 = time.perf_counter()
        off += offline_rows(L, obs, expert, job, s)
        rows, tr = closed_loop(L, s)
        closed += rows
        traces.append(trace_table(tr, seed, s["trace_episodes"]))
        timing.append(time.perf_counter() - t0)
    off, closed = pd.DataFrame(off), pd.DataFrame(closed)
    write_parquet(job.output.offline, off)
    write_parquet(job.output.closed, closed)
    write_parquet(job.output.traces, pd.concat(traces, ignore_index=True))
    mf = build_metrics(off, closed, s)
    mf.add("eval_seconds", timing, unit="s", direction="lower", timing=True,
           description="wall time of one seed's offline and closed-loop evaluation")
    mf.write(job.output.metrics)
