"""Action chunks and the smoothness measures of the paper, in plain numpy (units: metres, seconds).

- ``chunks``: every (observation, next ``H`` actions) pair of a demonstration, the tail padded with the
  last action (the robot holds), as action-chunking policies are trained.
- ``to_low_rate`` / ``hold_60`` / ``interp_60``: the 15 Hz representation (every ``ratio``-th action) and
  its two ways back to 60 Hz (zero-order hold, linear interpolation).
- ``acc_jerk``: L2 norm of the 2nd / 3rd finite difference per step, times fps^2 / fps^3 (m/s^2, m/s^3).
- ``boundary_gap``: D0 = || a[switch] - a[switch - 1] ||_1, the first executed action of a new chunk
  against the last executed action of the previous one (the published definition, cur[async] - prev[-1]).
- ``pause_mask``: ticks on which the fingertip is (nearly) still while the task is not finished.
"""

from __future__ import annotations

import numpy as np


def chunks(obs: np.ndarray, act: np.ndarray, horizon: int, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """obs (E, T, O), act (E, T, A) -> (N, O) observations and (N, horizon, A) chunks, N = E * ceil(T / stride)."""
    e, t, a = act.shape
    padded = np.concatenate([act, np.repeat(act[:, -1:], horizon - 1, axis=1)], 1)
    starts = np.arange(0, t, stride)
    idx = starts[:, None] + np.arange(horizon)[None]
    return obs[:, starts].reshape(-1, obs.shape[-1]), padded[:, idx].reshape(-1, horizon, a)


def to_low_rate(chunk: np.ndarray, ratio: int) -> np.ndarray:
    """(..., H, A) -> (..., H / ratio, A): the actions at steps 0, ratio, 2 ratio, ..."""
    return chunk[..., ::ratio, :]


def hold_60(knots: np.ndarray, ratio: int) -> np.ndarray:
    """Zero-order hold: each low-rate action repeated ``ratio`` times."""
    return np.repeat(knots, ratio, axis=-2)


def interp_60(knots: np.ndarray, ratio: int) -> np.ndarray:
    """Linear interpolation between consecutive knots (steps 0, ratio, ...); after the last knot the
    segment continues with the last knots' slope (no future knot is known inside one chunk)."""
    k = knots.shape[-2]
    frac = np.arange(k * ratio) / ratio
    lo = np.minimum(np.floor(frac).astype(int), k - 2)
    w = (frac - lo)[:, None]
    return knots[..., lo, :] * (1 - w) + knots[..., lo + 1, :] * w


def acc_jerk(traj: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """traj (..., T, A) -> per-step acceleration (..., T-2) and jerk (..., T-3) magnitudes."""
    acc = np.linalg.norm(np.diff(traj, 2, axis=-2), axis=-1) * fps**2
    jerk = np.linalg.norm(np.diff(traj, 3, axis=-2), axis=-1) * fps**3
    return acc, jerk


def summary(values: np.ndarray) -> dict[str, float]:
    """mean / p95 / max of a pooled set of per-step magnitudes."""
    v = np.asarray(values, float).ravel()
    return {"mean": float(v.mean()), "p95": float(np.percentile(v, 95)), "max": float(v.max())}


def boundary_gap(executed: np.ndarray, switches) -> np.ndarray:
    """executed (T, A), switch ticks -> D0 per switch (L1 norm, metres)."""
    s = np.asarray([t for t in switches if 1 <= t < len(executed)], int)
    return np.abs(executed[s] - executed[s - 1]).sum(-1)


def boundary_jerk(executed: np.ndarray, switches, fps: float) -> np.ndarray:
    """Mean jerk magnitude of the third differences whose stencil holds ticks s - 1 and s of each switch s."""
    _, jerk = acc_jerk(executed, fps)  # jerk[i] uses ticks i .. i+3
    out = []
    for s in switches:
        idx = [i for i in (s - 3, s - 2, s - 1) if 0 <= i < len(jerk)]
        if idx:
            out.append(float(jerk[idx].mean()))
    return np.asarray(out)


def pause_mask(tip: np.ndarray, done_tick: int, fps: float, v_min: float) -> np.ndarray:
    """tip (T + 1, 2) positions at ticks 0..T -> (T,) bool: speed below ``v_min`` before the task is done
    (``done_tick`` < 0: never done, every tick counts)."""
    speed = np.linalg.norm(np.diff(tip, axis=0), axis=-1) * fps
    active = np.arange(len(speed)) < (done_tick if done_tick >= 0 else len(speed))
    return (speed < v_min) & active


def active_ticks(n: int, done_tick: int) -> int:
    return min(n, done_tick) if done_tick >= 0 else n
