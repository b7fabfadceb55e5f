"""Closed-loop execution of chunking policies in MuJoCo, synchronous or asynchronous, with a simulated
inference delay, and the chunk-switching strategies compared by the paper.

Time is counted in 60 Hz ticks. A chunk inferred from the observation at tick ``s`` holds the actions for
ticks ``s .. s + H - 1``; inference takes ``d`` ticks (the delay); ``E`` actions of each chunk are executed.

- ``sync``: the robot holds its last action while the policy infers (``d`` ticks: a pause), then executes
  the chunk's actions 0 .. E-1; the next inference starts when they are done.
- ``async`` (naive switch): inference starts every ``E`` ticks while the robot keeps executing; the new chunk
  arrives at ``s + d`` and its actions ``d .. d + E - 1`` are executed (those before ``d`` are stale). The
  actions executed during the delay, ticks ``s .. s + d - 1``, were committed by the previous chunk.
- ``rtr`` (Reuse-then-Refine): as async, but the arriving chunk is first refined: the ``d`` committed
  actions (reuse) and the new chunk's actions from ``d`` on are concatenated into one chunk, encoded by
  the VAE and decoded; the decoded actions ``d .. d + E - 1`` are executed. With ``d = 0`` nothing is
  reused and the refinement is an autoencoding of the new chunk.
- ``rtc`` (RTC-like): as async, but the policy inpaints its chunk's first ``d`` actions to the committed
  ones while sampling (action-space policies only).
- ``te`` (temporal ensembling, ACT): inference starts every ``te_period`` ticks; at each tick the executed
  action is the weighted mean, w_i = exp(-m i) (i = 0 the oldest), of every arrived chunk's action for that
  tick; with ``te_period`` < ``E`` two chunks overlap (two inferences in flight; an assumption).

Before the first chunk arrives the robot holds its start pose in every mode. A *switch* is the first tick
executed from a new chunk (for ``te`` the tick at which a new chunk joins the mean); the switch out of the
initial hold is not counted.

``held`` marks the *scheduled* hold ticks: the initial wait for the first chunk (every mode) and, in ``sync``,
the ``d`` ticks of every inference. Pauses on them are fixed by the schedule (sync holds 24 of every 48 ticks,
async never does), so the pause claim counts pauses on the other ticks only. ``inferences`` is the number of
policy calls per episode (temporal ensembling calls the policy every ``te_period`` ticks, twice as often as
the other asynchronous modes at the default settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import sim

MODES = ("sync", "async", "rtr", "rtc", "te")


@dataclass(frozen=True)
class Schedule:
    mode: str
    delay: int
    execute: int
    horizon: int
    te_period: int = 12
    te_m: float = 0.01

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}")
        if self.mode != "sync" and self.delay > self.execute:
            raise ValueError("async execution needs delay <= executed actions per chunk")
        if self.delay + self.execute > self.horizon:
            raise ValueError("delay + executed actions exceed the chunk")


# policy(obs (n, O), known_prefix (n, d, A) or None) -> physical chunk (n, H, A)
Policy = Callable[[np.ndarray, "np.ndarray | None"], np.ndarray]
# refine(prefix (n, d, A), chunk (n, H, A), obs (n, O) the chunk was inferred from) -> refined chunk (n, H, A)
Refine = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def te_action(chunks: list[tuple[int, np.ndarray]], tick: int, sch: Schedule, fallback: np.ndarray) -> np.ndarray:
    """Temporal ensemble of the arrived chunks covering ``tick`` (oldest weighted exp(0) = 1)."""
    live = [(s, c) for s, c in chunks if s + sch.delay <= tick < s + sch.horizon]
    if not live:
        return fallback
    w = np.exp(-sch.te_m * np.arange(len(live)))
    return sum(wi * c[:, tick - s] for wi, (s, c) in zip(w, live)) / w.sum()


def rollout(tasks: np.ndarray, policy: Policy, sch: Schedule, ticks: int, refine: Refine | None = None) -> dict:
    """Run every task for ``ticks`` ticks; returns executed actions, fingertip and puck paths, switch ticks,
    success and completion tick per episode."""
    env = sim.PushBatch(tasks)
    n, H, d, E = env.n, sch.horizon, sch.delay, sch.execute
    plan = np.repeat(env.cmd[:, None], ticks + H + d + E, axis=1)
    executed = np.zeros((n, ticks, sim.ACT_DIM))
    tips, pucks = [env.tip()], [env.puck()]
    switches, ensemble, next_start = [], [], 0
    held = np.zeros(ticks, bool)
    held[:d] = True  # the start pose is held until the first chunk arrives (every mode)
    inferences = 0
    for tick in range(ticks):
        if tick == next_start:
            ob = env.obs()
            inferences += 1
            if sch.mode == "sync":
                plan[:, tick:tick + d] = env.cmd[:, None]
                held[tick:tick + d] = True
                chunk = policy(ob, None)
                plan[:, tick + d:tick + d + E] = chunk[:, :E]
                switches.append(tick + d)
                next_start = tick + d + E
            elif sch.mode == "te":
                ensemble.append((tick, policy(ob, None)))
                ensemble = [(s, c) for s, c in ensemble if s + H > tick]
                switches.append(tick + d)
                next_start = tick + sch.te_period
            else:
                prefix = plan[:, tick:tick + d].copy()
                chunk = policy(ob, prefix if sch.mode == "rtc" else None)
                if sch.mode == "rtr":
                    chunk = refine(prefix, chunk, ob)
                plan[:, tick + d:tick + d + E] = chunk[:, d:d + E]
                switches.append(tick + d)
                next_start = tick + E
        a = te_action(ensemble, tick, sch, env.cmd) if sch.mode == "te" else plan[:, tick]
        executed[:, tick] = a
        env.step(a)
        tips.append(env.tip())
        pucks.append(env.puck())
    return {"executed": executed, "tips": np.stack(tips, 1), "pucks": np.stack(pucks, 1),
            "switches": [t for t in switches[1:] if t < ticks], "success": env.done.copy(),
            "done_tick": env.done_tick.copy(), "goal": env.goal.copy(), "held": held, "inferences": inferences}


def expert_rollout(tasks: np.ndarray, ticks: int) -> dict:
    """The scripted expert in the same format (the ceiling; it re-plans every tick, so no switches)."""
    env, ex = sim.PushBatch(tasks), None
    ex = sim.Expert(env.n)
    executed = np.zeros((env.n, ticks, sim.ACT_DIM))
    tips, pucks = [env.tip()], [env.puck()]
    for tick in range(ticks):
        executed[:, tick] = ex.act(env.tip(), env.puck(), env.goal, env.done)
        env.step(executed[:, tick])
        tips.append(env.tip())
        pucks.append(env.puck())
    return {"executed": executed, "tips": np.stack(tips, 1), "pucks": np.stack(pucks, 1), "switches": [],
            "success": env.done.copy(), "done_tick": env.done_tick.copy(), "goal": env.goal.copy(),
            "held": np.zeros(ticks, bool), "inferences": 0}  # no scheduled hold, no policy inference
