"""From raw event streams to each arm's input, identical event selection for every arm.

The sweeps change what the sensor delivers, not the models: ``subsample`` keeps a random subset of events
(the paper's random sampling; the draw depends only on the sample and the budget, so every arm sees the
same events), ``reduce_resolution`` merges pixels into coarse cells as tonic's ``Downsample`` does (coordinates
are mapped back to cell centres so that every model keeps its input size). The dense baselines bin events
with tonic's ``ToFrame`` and ``ToVoxelGrid``; event2vec and the point-set model read the events themselves.
"""

from __future__ import annotations

import numpy as np
import torch

from .simulator import EVENT_DTYPE


def subsample(ev: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """At most ``n`` events drawn without replacement, kept in time order."""
    if len(ev) <= n:
        return ev
    return ev[np.sort(rng.choice(len(ev), size=n, replace=False))]


def reduce_resolution(ev: np.ndarray, factor: int, sensor: int) -> np.ndarray:
    """The stream a sensor ``factor`` times coarser per axis would give, in full-sensor coordinates.

    The coarse cell is tonic's ``Downsample(spatial_factor=1 / factor)`` arithmetic (coordinate times the
    factor, truncated to an integer by the int64 field), computed here on the two coordinate columns: the same
    cells, without copying the stream through the transform (a third of the CNN arms' training step went
    there); a test checks it against tonic for every factor."""
    if factor == 1:
        return ev
    out = ev.copy()
    for axis in ("x", "y"):
        coarse = (ev[axis] * (1.0 / factor)).astype(np.int64)  # tonic: events[axis] = events[axis] * factor
        out[axis] = np.minimum(coarse * factor + factor // 2, sensor - 1)
    return out


def shuffle_time(ev: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The control's input: each event gets another event's timestamp, then the stream is re-sorted.

    Where and with which polarity events happened is kept; when (and so the order) is destroyed.
    """
    out = ev.copy()
    out["t"] = rng.permutation(ev["t"])
    return out[np.argsort(out["t"], kind="stable")]


def kmeans_compress(ev: np.ndarray, k: int, sensor: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The paper's optional compression: k-means over (x, y, t, p) into ``k`` centroid events.

    Returns centroid events (rounded to the pixel grid and the nearest polarity) and their intensity, the
    cluster sizes divided by their mean, which scales the centroid's token.
    """
    from sklearn.cluster import KMeans

    if len(ev) <= k:
        return ev, np.ones(len(ev))
    span = max(int(ev["t"].max() - ev["t"].min()), 1)
    feats = np.stack([ev["x"] / sensor, ev["y"] / sensor, (ev["t"] - ev["t"].min()) / span, ev["p"]], 1)
    km = KMeans(n_clusters=k, n_init=1, max_iter=50, random_state=seed).fit(feats)
    sizes = np.bincount(km.labels_, minlength=k).astype(float)
    c = km.cluster_centers_
    out = np.zeros(k, EVENT_DTYPE)
    out["x"] = np.clip(np.round(c[:, 0] * sensor), 0, sensor - 1)
    out["y"] = np.clip(np.round(c[:, 1] * sensor), 0, sensor - 1)
    out["t"] = np.round(c[:, 2] * span + ev["t"].min())
    out["p"] = c[:, 3] >= 0.5
    order = np.argsort(out["t"], kind="stable")
    return out[order], (sizes / sizes.mean())[order]


def _padded(streams: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All streams in one zero-padded structured array (batch, longest) and the mask of real events."""
    n = max(1, max(len(e) for e in streams))
    out = np.zeros((len(streams), n), EVENT_DTYPE)
    mask = np.zeros((len(streams), n), bool)
    for i, ev in enumerate(streams):
        out[i, : len(ev)] = ev
        mask[i, : len(ev)] = True
    return out, mask


def event_tokens(streams: list[np.ndarray], sensor: int, intensity: list[np.ndarray] | None = None):
    """event2vec's input: per event (p, y, x) in [-1, 1], the gap to the previous event (timestamps divided
    by the sample's maximum), the intensity, and the padding mask (True = real event)."""
    ev, mask = _padded(streams)
    scale = 2.0 / (sensor - 1)
    pyx = np.stack([ev["p"] * 2.0 - 1.0, ev["y"] * scale - 1.0, ev["x"] * scale - 1.0], -1) * mask[..., None]
    t = ev["t"] / np.maximum(ev["t"].max(1, keepdims=True), 1.0)
    dt = np.diff(t, axis=1, prepend=t[:, :1]) * mask
    inten = np.ones(mask.shape)
    if intensity is not None:
        for i, w in enumerate(intensity):
            inten[i, : len(w)] = w
    return {"pyx": torch.from_numpy(pyx.astype(np.float32)), "dt": torch.from_numpy(dt.astype(np.float32)),
            "intensity": torch.from_numpy(inten.astype(np.float32)), "mask": torch.from_numpy(mask)}


def point_set(streams: list[np.ndarray], sensor: int):
    """The point-set baseline's input: (x, y, t, p) per event scaled to [-1, 1] (t by the sample's span)."""
    ev, mask = _padded(streams)
    t = ev["t"].astype(np.float64)
    t0 = np.where(mask, t, np.inf).min(1, keepdims=True)
    t0[~np.isfinite(t0)] = 0.0
    t = (t - t0) / np.maximum(t.max(1, keepdims=True) - t0, 1.0)
    pts = np.stack([ev["x"] / (sensor - 1), ev["y"] / (sensor - 1), t, ev["p"]], -1) * 2.0 - 1.0
    return {"points": torch.from_numpy((pts * mask[..., None]).astype(np.float32)), "mask": torch.from_numpy(mask)}


def frames(streams: list[np.ndarray], sensor: int, bins: int):
    """Frame-histogram baseline's input: tonic ``ToFrame`` counts per (time bin, polarity), log-scaled and
    divided by the stream's maximum (so the input scale does not depend on how many events were kept:
    +5 points of validation accuracy for the baseline at default scale)."""
    import tonic.transforms as T

    to_frame = T.ToFrame(sensor_size=(sensor, sensor, 2), n_time_bins=bins)
    out = np.zeros((len(streams), bins * 2, sensor, sensor), np.float32)
    for i, ev in enumerate(streams):
        if len(ev) > 1:
            out[i] = to_frame(ev).reshape(-1, sensor, sensor)
    return {"image": _unit_max(np.log1p(out))}


def voxels(streams: list[np.ndarray], sensor: int, bins: int):
    """Voxel-grid baseline's input: tonic ``ToVoxelGrid`` (bilinear in time, signed by polarity), divided by
    the stream's largest magnitude, as the frames are."""
    import tonic.transforms as T

    to_voxel = T.ToVoxelGrid(sensor_size=(sensor, sensor, 2), n_time_bins=bins)
    out = np.zeros((len(streams), bins, sensor, sensor), np.float32)
    for i, ev in enumerate(streams):
        if len(ev) > 1:
            out[i] = to_voxel(ev).reshape(bins, sensor, sensor)
    return {"image": _unit_max(out)}


def _unit_max(x: np.ndarray) -> torch.Tensor:
    """Each sample divided by its largest magnitude (all-zero samples stay zero)."""
    m = np.abs(x).reshape(len(x), -1).max(1) if len(x) else np.zeros(0)
    return torch.from_numpy((x / np.maximum(m, 1e-6)[:, None, None, None]).astype(np.float32))
