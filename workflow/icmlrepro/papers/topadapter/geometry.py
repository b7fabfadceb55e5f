"""Patch tokens of a point cloud (farthest-point sampling + kNN groups) and the kNN simplices of a patch.

Simplex generator input (ToInjection), per patch and scale k (the k points nearest the patch centre):
  0D: each vertex's offset from the centre and its length;
  1D: the edge from each vertex to its nearest other vertex of the patch (vector and length);
  2D: the triangle of each vertex and its two nearest other vertices: the unit normal as its outer
      product n n^T (upper triangle, so the sign of the normal does not matter) and the area.
Lengths are divided by the patch radius at that scale (areas by its square), so features compare across scales.
"""

from __future__ import annotations

import torch

D0, D1, D2 = 4, 4, 7  # raw feature widths of the 0D, 1D, 2D simplices


def fps(points: torch.Tensor, n: int) -> torch.Tensor:
    """Farthest-point sampling (batched, starting from point 0): (B, N, 3) -> indices (B, n)."""
    B, N, _ = points.shape
    idx = torch.zeros(B, n, dtype=torch.long)
    dist = torch.full((B, N), float("inf"))
    far = torch.zeros(B, dtype=torch.long)
    ar = torch.arange(B)
    for i in range(n):
        idx[:, i] = far
        d = ((points - points[ar, far][:, None]) ** 2).sum(-1)
        dist = torch.minimum(dist, d)
        far = dist.argmax(1)
    return idx


def knn_groups(points: torch.Tensor, centers: torch.Tensor, k: int) -> torch.Tensor:
    """Indices (B, G, k) of the k nearest points of each centre, nearest first (the centre itself included)."""
    d = torch.cdist(centers, points)
    return d.topk(k, dim=-1, largest=False).indices


def patches(points: torch.Tensor, n_groups: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(centres (B, G, 3), neighbourhoods relative to their centre (B, G, k, 3), nearest first)."""
    ar = torch.arange(points.shape[0])[:, None]
    centers = points[ar, fps(points, n_groups)]
    nb = knn_groups(points, centers, k)
    return centers, points[ar[..., None], nb] - centers[:, :, None]


def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x (..., k, 3), idx (..., k, m) -> (..., k, m, 3)."""
    return torch.gather(x.unsqueeze(-3).expand(*idx.shape[:-1], x.shape[-2], 3), -2,
                        idx.unsqueeze(-1).expand(*idx.shape, 3))


def simplex_features(rel: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Raw 0D (.., k, 4), 1D (.., k, 4), 2D (.., k, 7) features of the scale-k complex of each patch.

    ``rel``: (B, G, K, 3) offsets from the centre, nearest first; the first k are the scale's vertices.
    """
    p = rel[..., :k, :]
    r = p.norm(dim=-1).amax(-1, keepdim=True).clamp_min(1e-6)  # (B, G, 1) patch radius
    zero = torch.zeros_like(r[..., :1].expand(*p.shape[:-1]))
    f0 = torch.cat([p / r[..., None], (p.norm(dim=-1) / r).unsqueeze(-1)], -1)
    if k < 3:
        return f0, torch.cat([torch.zeros_like(p), zero.unsqueeze(-1)], -1), torch.zeros(*p.shape[:-1], D2)
    d = torch.cdist(p, p) + torch.eye(k) * 1e9  # no self-edges
    nn = d.topk(2, dim=-1, largest=False).indices  # (B, G, k, 2) two nearest other vertices
    q = _gather(p, nn)  # (B, G, k, 2, 3)
    e = q[..., 0, :] - p
    f1 = torch.cat([e / r[..., None], (e.norm(dim=-1) / r).unsqueeze(-1)], -1)
    cr = torch.linalg.cross(q[..., 0, :] - p, q[..., 1, :] - p)
    area = cr.norm(dim=-1) / 2
    n = cr / cr.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    iu = torch.triu_indices(3, 3)
    outer = (n.unsqueeze(-1) * n.unsqueeze(-2))[..., iu[0], iu[1]]
    f2 = torch.cat([outer, (area / r**2).unsqueeze(-1)], -1)
    return f0, f1, f2


def simplex_table(rel: torch.Tensor, scales) -> torch.Tensor:
    """Every scale's raw simplex features of each patch in one tensor (B, G, sum(scales), D0 + D1 + D2): the rows
    of scale k are k simplices, the columns [0D | 1D | 2D]. They depend on the points only, so the trainer computes
    them once per split (not once per step and seed); ``rotate_table_z`` follows the rotation augmentation."""
    return torch.cat([torch.cat(simplex_features(rel, k), -1) for k in scales], -2)


def table_slices(scales) -> dict[int, slice]:
    """The rows of each scale in a ``simplex_table`` built with ``scales``."""
    out, start = {}, 0
    for k in scales:
        out[k] = slice(start, start + k)
        start += k
    return out


def rotate_table_z(table: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """The table of the patches rotated about z (R: (B, 3, 3) per cloud, a z-rotation [[c, -s, 0], [s, c, 0],
    [0, 0, 1]]): offsets and edges rotate, lengths and areas do not, a normal's outer product n n^T becomes
    R n n^T R^T (equal to recomputing the features after rotating). Written elementwise in c and s (the rotation
    of the 6 stored entries of n n^T in closed form): the same numbers as the 3 x 3 products, a fraction of the
    cost (this runs at every training step of every TopAdapter arm)."""
    c = R[:, 0, 0].view(-1, *([1] * (table.dim() - 2)))
    s = R[:, 1, 0].view(-1, *([1] * (table.dim() - 2)))
    t = table.unbind(-1)
    xx, xy, xz, yy, yz, zz = t[D0 + D1:D0 + D1 + 6]
    cc, ss, cs = c * c, s * s, c * s
    cols = [c * t[0] - s * t[1], s * t[0] + c * t[1], t[2], t[3],
            c * t[D0] - s * t[D0 + 1], s * t[D0] + c * t[D0 + 1], t[D0 + 2], t[D0 + 3],
            cc * xx - 2 * cs * xy + ss * yy, cs * (xx - yy) + (cc - ss) * xy, c * xz - s * yz,
            ss * xx + 2 * cs * xy + cc * yy, s * xz + c * yz, zz, t[D0 + D1 + 6]]
    return torch.stack(cols, -1)
