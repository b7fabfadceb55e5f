"""Demonstrations: the scripted expert pushing the puck in MuJoCo, recorded at 60 Hz.

One job per seed (``data/seed<k>/``): every seed draws its own training and test demonstrations, from task
streams derived from that seed alone (so seed k's data do not depend on how many seeds are run), and the
VAE, the policies and the evaluation of seed k use seed k's data. Training and test demonstrations come
from disjoint task streams (different derived seeds); the closed-loop evaluation draws its own tasks from a
third stream per seed (evaluate.py), so no evaluated episode was demonstrated. Failed demonstrations
would be dropped from training (the usual filter for scripted data); their count is recorded in the summary (the expert succeeds on all tasks tested so far).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_json, write_parquet
from icmlrepro.core.seeding import derive_seed

from . import sim
from .chunks import chunks

ACT_COLS = ["act_x", "act_y"]


def demo_table(split: str, n: int, ticks: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(steps, episodes) of ``n`` expert episodes of ``ticks`` ticks on tasks from the seed's stream of the split."""
    tasks = sim.sample_tasks(np.random.default_rng(derive_seed(seed, "rtr", "demos", split)), n)
    r = sim.run_expert(tasks, ticks)
    e, t = np.meshgrid(np.arange(n), np.arange(ticks), indexing="ij")
    steps = pd.DataFrame({"split": split, "episode": e.ravel(), "t": t.ravel()})
    for i, name in enumerate(sim.OBS_NAMES):
        steps[name] = r["obs"][..., i].ravel()
    for i, name in enumerate(ACT_COLS):
        steps[name] = r["act"][..., i].ravel()
    episodes = pd.DataFrame({"split": split, "episode": np.arange(n), "puck_x": tasks[:, 0], "puck_y": tasks[:, 1],
                             "goal_x": tasks[:, 2], "goal_y": tasks[:, 3], "success": r["success"],
                             "done_tick": r["done_tick"]})
    return steps, episodes


def arrays(steps: pd.DataFrame, episodes: pd.DataFrame, split: str) -> tuple[np.ndarray, np.ndarray]:
    """obs (E, T, 10) and actions (E, T, 2) of the split's successful demonstrations."""
    ok = set(episodes.loc[(episodes["split"] == split) & episodes["success"], "episode"])
    st = steps[(steps["split"] == split) & steps["episode"].isin(ok)].sort_values(["episode", "t"])
    n, t = len(ok), st["t"].nunique()
    return (st[list(sim.OBS_NAMES)].to_numpy().reshape(n, t, -1), st[ACT_COLS].to_numpy().reshape(n, t, -1))


def task_chunks(path_steps, path_episodes, split: str, horizon: int, stride: int = 1,
                margin: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(observation, next ``horizon`` actions) pairs of the split's successful demonstrations, starting every
    ``stride`` ticks up to ``margin`` ticks after the puck reached the goal: the idle tail of a recording
    (the expert resting) is left out, so that standing still is not what the policies mostly learn."""
    steps, episodes = read_parquet(path_steps), read_parquet(path_episodes)
    obs, act = arrays(steps, episodes, split)
    done = episodes.loc[(episodes["split"] == split) & episodes["success"], "done_tick"].to_numpy()
    o, c = chunks(obs, act, horizon, stride)
    starts = np.arange(0, obs.shape[1], stride)
    keep = (starts[None, :] < (done + margin)[:, None]).ravel()  # episode-major, as chunks() orders them
    return o[keep], c[keep]


def run(job) -> None:
    s, seed = job.params, int(job.wildcards.seed)
    parts = [demo_table(split, s[f"n_{split}_demos"], s["demo_ticks"], seed) for split in ("train", "test")]
    steps = pd.concat([p[0] for p in parts], ignore_index=True)
    episodes = pd.concat([p[1] for p in parts], ignore_index=True)
    write_parquet(job.output.steps, steps)
    write_parquet(job.output.episodes, episodes)
    done = episodes.loc[episodes["success"], "done_tick"]
    write_json(job.output.summary, {
        "seed": seed,
        "episodes": episodes.groupby("split").size().to_dict(),
        "expert_success": episodes.groupby("split")["success"].mean().to_dict(),
        "expert_done_tick": {"median": float(done.median()), "max": float(done.max())},
        "dropped_failed_demos": int((~episodes["success"]).sum()),
    })
