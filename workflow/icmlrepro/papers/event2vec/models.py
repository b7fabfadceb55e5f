"""event2vec and its three baselines, sized comparably (parameter counts are measured, never assumed).

event2vec follows the authors' code: a bias-free 3-layer MLP with LayerNorms embeds (p, y, x), a bias-free
3-layer Conv1d (k = 3, grouped, LayerNorm after each layer) embeds the gaps between consecutive
timestamps, the token is their sum (times the intensity of a k-means centroid), an encoder mixes tokens,
masked mean pooling and a linear head classify. The upstream encoder is a gated linear-attention network
(GLA, GPU-only kernels), which reads the sequence in order. A standard ``nn.TransformerEncoder`` stands in
(the brief allows it); since self-attention alone ignores order, a sinusoidal encoding of each event's
relative position in the stream (its rank / length, so it does not depend on the event budget) is added to
the token: the stand-in for the order that GLA's recurrence sees. Without it the model cannot tell a
clockwise loop from a counter-clockwise one (measured: it scored as the shuffled-timestamp control).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import representations as R


def _channel_norm(norm: nn.LayerNorm, h: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the channels of a (batch, channels, length) tensor."""
    return norm(h.transpose(1, 2)).transpose(1, 2)


def relative_position_encoding(mask: torch.Tensor, d: int) -> torch.Tensor:
    """(batch, length, d) sinusoids of each real event's rank / (events - 1) in [0, 1]; zero on padding."""
    n = mask.sum(1, keepdim=True).clamp_min(2).to(torch.float32)
    pos = torch.arange(mask.shape[1], dtype=torch.float32)[None, :] / (n - 1)
    freq = math.pi * torch.arange(1, d // 2 + 1, dtype=torch.float32)
    ang = pos[..., None] * freq
    return torch.cat([torch.sin(ang), torch.cos(ang)], -1) * mask[..., None]


class Event2Vec(nn.Module):
    def __init__(self, classes: int, d: int, layers: int, heads: int):
        super().__init__()
        q, h = d // 4, d // 2
        self.spatial = nn.Sequential(nn.Linear(3, q, bias=False), nn.LayerNorm(q), nn.ReLU(),
                                     nn.Linear(q, h, bias=False), nn.LayerNorm(h), nn.ReLU(),
                                     nn.Linear(h, d, bias=False), nn.LayerNorm(d))
        self.temporal = nn.ModuleList([nn.Conv1d(1, q, 3, padding=1, bias=False),
                                       nn.Conv1d(q, h, 3, padding=1, groups=q, bias=False),
                                       nn.Conv1d(h, d, 3, padding=1, groups=h, bias=False)])
        self.temporal_norms = nn.ModuleList([nn.LayerNorm(c) for c in (q, h, d)])
        block = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)
        self.d = d

    def embed(self, pyx, dt, intensity, mask):
        """Tokens: spatial + temporal embedding, scaled by intensity; padding tokens are zero.

        Padding is zeroed after every Conv1d layer, so a stream's tokens do not depend on how much
        padding its batch needed (a conv layer would otherwise read its neighbour's activations)."""
        m = mask[:, None, :].to(dt.dtype)
        h = dt[:, None, :] * m
        for i, (conv, norm) in enumerate(zip(self.temporal, self.temporal_norms)):
            h = _channel_norm(norm, conv(h) * m) * m
            if i < len(self.temporal) - 1:
                h = torch.relu(h)
        tok = self.spatial(pyx) + h.transpose(1, 2)
        return tok * (intensity * mask)[..., None]

    def forward(self, pyx, dt, intensity, mask):
        x = self.embed(pyx, dt, intensity, mask) + relative_position_encoding(mask, self.d)
        h = self.encoder(x, src_key_padding_mask=~mask)
        m = mask[..., None].float()
        return self.head((h * m).sum(1) / m.sum(1).clamp_min(1.0))


class DenseCNN(nn.Module):
    """The densifying baselines: a small CNN over the frame histogram or the voxel grid."""

    def __init__(self, classes: int, in_ch: int, width: int):
        super().__init__()
        w = width

        def block(i, o, stride):
            return [nn.Conv2d(i, o, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]

        self.body = nn.Sequential(*block(in_ch, w, 1), *block(w, 2 * w, 2), *block(2 * w, 2 * w, 2),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(2 * w, classes)

    def forward(self, image):
        return self.head(self.body(image))


class PointSet(nn.Module):
    """PointNet on events: a shared per-event MLP over (x, y, t, p), masked max pooling, an MLP head."""

    def __init__(self, classes: int, width: int):
        super().__init__()
        w = width
        self.point = nn.Sequential(nn.Linear(4, w), nn.ReLU(), nn.Linear(w, 2 * w), nn.ReLU(),
                                   nn.Linear(2 * w, 4 * w))
        self.head = nn.Sequential(nn.Linear(4 * w, 2 * w), nn.ReLU(), nn.Linear(2 * w, classes))

    def forward(self, points, mask):
        h = self.point(points).masked_fill(~mask[..., None], float("-inf")).amax(1)
        return self.head(torch.nan_to_num(h, neginf=0.0))


#: arm: (model family, whether timestamps are shuffled before anything sees them)
ARMS = {"event2vec": ("event2vec", False), "event2vec_shuffled_t": ("event2vec", True),
        "frame_cnn": ("frame", False), "voxel_cnn": ("voxel", False), "point_set": ("point", False)}


def build(arm: str, classes: int, s: dict) -> nn.Module:
    family = ARMS[arm][0]
    if family == "event2vec":
        return Event2Vec(classes, s["d"], s["layers"], s["heads"])
    if family == "frame":
        return DenseCNN(classes, 2 * s["time_bins"], s["cnn_width"])
    if family == "voxel":
        return DenseCNN(classes, s["time_bins"], s["cnn_width"])
    return PointSet(classes, s["point_width"])


def inputs(arm: str, streams, s: dict, intensity=None) -> dict:
    """The arm's input tensors from raw streams: representation building is part of the arm's cost."""
    family = ARMS[arm][0]
    if family == "event2vec":
        return R.event_tokens(streams, s["sensor"], intensity)
    if family == "frame":
        return R.frames(streams, s["sensor"], s["time_bins"])
    if family == "voxel":
        return R.voxels(streams, s["sensor"], s["time_bins"])
    return R.point_set(streams, s["sensor"])


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
