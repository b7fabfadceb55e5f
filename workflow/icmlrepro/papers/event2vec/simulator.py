"""A simulated event camera over rendered motion: the miniature's stand-in for DVS recordings.

Events come from per-pixel log-intensity change thresholding, as ESIM/v2e-style simulators do: between two
rendered frames the log intensity is interpolated linearly, every crossing of the pixel's contrast threshold
(drawn per pixel around the nominal one) emits an event of that sign at the interpolated time, a pixel is
deaf for a refractory period after it fires, and background-activity noise adds Poisson events.

Classes mimic the two benchmark families. Gesture-like (DVS Gesture): a bright disc moving along a closed
loop (circle or diamond) clockwise or counter-clockwise, or swiping in one of four directions. Sign-like
(ASL-DVS): a static shape (square, triangle, cross, ring) drifting slowly. The loop classes make one full
turn from a random phase, so clockwise and counter-clockwise loops leave the same time-integrated event
histogram: only the event *order* tells them apart (the shuffled-timestamp control relies on this).
"""

from __future__ import annotations

import numpy as np

CLASSES = ("circle_cw", "circle_ccw", "diamond_cw", "diamond_ccw", "swipe_right", "swipe_left", "swipe_down",
           "swipe_up", "square", "triangle", "cross", "ring")
#: classes that differ from a partner only by the direction of time (same time-integrated histogram)
TIME_DEFINED = ("circle_cw", "circle_ccw", "diamond_cw", "diamond_ccw")
EVENT_DTYPE = np.dtype([("x", np.int64), ("y", np.int64), ("t", np.int64), ("p", np.int64)])
DURATION_US = 1_000_000


def _loop_path(kind: str, sign: int, phase: float, n: int, centre, radius) -> np.ndarray:
    """(n, 2) positions making exactly one turn (sign +1 counter-clockwise in image coords, -1 clockwise)."""
    a = phase + sign * 2 * np.pi * np.linspace(0.0, 1.0, n)
    if kind == "circle":
        return centre + radius * np.stack([np.cos(a), np.sin(a)], 1)
    # diamond: the L1 unit circle, traversed at constant angular rate
    c, s = np.cos(a), np.sin(a)
    r = radius / (np.abs(c) + np.abs(s))
    return centre + np.stack([r * c, r * s], 1)


def trajectory(label: str, n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Object centre (x, y) at each of ``n`` frames, with random phase, centre, radius and speed."""
    centre = size / 2 + rng.uniform(-0.08, 0.08, 2) * size
    if label.startswith(("circle", "diamond")):
        kind, turn = label.split("_")
        return _loop_path(kind, 1 if turn == "ccw" else -1, rng.uniform(0, 2 * np.pi), n, centre,
                          rng.uniform(0.22, 0.32) * size)
    if label.startswith("swipe"):
        d = {"right": (1, 0), "left": (-1, 0), "down": (0, 1), "up": (0, -1)}[label.split("_")[1]]
        span = rng.uniform(0.45, 0.65) * size
        off = rng.uniform(-0.15, 0.15) * size * np.array(d[::-1])
        s = np.linspace(-span / 2, span / 2, n)[:, None]
        return centre + off + s * np.array(d, float)
    drift = rng.normal(0, 1, 2)
    drift = drift / np.linalg.norm(drift) * rng.uniform(0.08, 0.15) * size
    return centre + np.linspace(-0.5, 0.5, n)[:, None] * drift


def shape_mask(label: str, xx: np.ndarray, yy: np.ndarray, cx: float, cy: float, r: float) -> np.ndarray:
    """Soft (anti-aliased) occupancy in [0, 1] of the object centred at (cx, cy) with size ``r``."""
    dx, dy = xx - cx, yy - cy
    if label == "square":
        d = np.maximum(np.abs(dx), np.abs(dy)) - r
    elif label == "triangle":
        d = np.maximum(np.maximum(-dy - r * 0.6, dy * 0.5 + np.abs(dx) * 0.87 - r * 0.5), -r)
    elif label == "cross":
        d = np.minimum(np.maximum(np.abs(dx) - r * 0.35, np.abs(dy) - r),
                       np.maximum(np.abs(dy) - r * 0.35, np.abs(dx) - r))
    elif label == "ring":
        d = np.abs(np.hypot(dx, dy) - r * 0.8) - r * 0.3
    else:  # the disc of the gesture classes
        d = np.hypot(dx, dy) - r * 0.6
    return np.clip(0.5 - d, 0.0, 1.0)


def render(label: str, background: np.ndarray, n_frames: int, rng: np.random.Generator) -> np.ndarray:
    """(n_frames, H, W) intensity video: a bright object over a static textured background."""
    size = background.shape[0]
    yy, xx = np.mgrid[0:size, 0:size].astype(float)
    path = trajectory(label, n_frames, size, rng)
    r = rng.uniform(0.12, 0.16) * size
    level = rng.uniform(0.8, 1.0)
    frames = np.empty((n_frames,) + background.shape)
    for i, (cx, cy) in enumerate(path):
        m = shape_mask(label, xx, yy, cx, cy, r)
        frames[i] = background * (1 - m) + level * m
    return frames


def events_from_video(frames: np.ndarray, rng: np.random.Generator, threshold: float, threshold_sigma: float,
                      refractory_us: int, noise_hz: float, duration_us: int = DURATION_US) -> np.ndarray:
    """Events (x, y, t, p) of a video under log-intensity change thresholding, sorted by time, and a mask of
    which of them are background-activity noise (the denoising audit needs to know)."""
    n, h, w = frames.shape
    logi = np.log(frames + 1e-3)
    c = np.clip(threshold + threshold_sigma * rng.standard_normal((h, w)), threshold / 3, None)
    ref = logi[0].copy()
    last = np.full((h, w), -np.inf)
    dt = duration_us / (n - 1)
    xs, ys, ts, ps = [], [], [], []
    for k in range(1, n):
        t0 = (k - 1) * dt
        delta = logi[k] - ref
        count = np.floor(np.abs(delta) / c).astype(int)
        if count.max() == 0:
            continue
        sign = np.sign(delta).astype(int)
        step = logi[k] - logi[k - 1]
        for j in range(1, int(count.max()) + 1):
            fire = count >= j
            yy, xx = np.nonzero(fire)
            # time at which the interpolated log intensity crosses ref + j*c*sign
            cross = ref[yy, xx] + j * c[yy, xx] * sign[yy, xx]
            frac = np.clip((cross - logi[k - 1][yy, xx]) / np.where(step[yy, xx] == 0, 1, step[yy, xx]), 0, 1)
            t = t0 + frac * dt
            ok = t - last[yy, xx] >= refractory_us
            last[yy[ok], xx[ok]] = t[ok]
            xs.append(xx[ok]); ys.append(yy[ok]); ts.append(t[ok]); ps.append((sign[yy, xx][ok] > 0).astype(int))
        ref = ref + count * c * sign  # the reference moves by whole thresholds, fired or refractory
    signal = len(np.concatenate(ts)) if ts else 0
    n_noise = rng.poisson(noise_hz * h * w * duration_us / 1e6)
    xs.append(rng.integers(0, w, n_noise)); ys.append(rng.integers(0, h, n_noise))
    ts.append(rng.uniform(0, duration_us, n_noise)); ps.append(rng.integers(0, 2, n_noise))
    ev = np.zeros(signal + n_noise, EVENT_DTYPE)
    for f, v in zip("xytp", (xs, ys, ts, ps)):
        ev[f] = np.concatenate(v) if f != "t" else np.round(np.concatenate(v)).astype(np.int64)
    is_noise = np.r_[np.zeros(signal, bool), np.ones(n_noise, bool)]
    order = np.argsort(ev["t"], kind="stable")
    return ev[order], is_noise[order]
