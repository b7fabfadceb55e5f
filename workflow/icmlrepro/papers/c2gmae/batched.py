"""Many trainings of one rung (seeds x rates x inits) as one batched model: the cost of a few for many.

Every replicate (a *slice*: seed, learning rate, init) keeps what it has alone:

* its graph (each seed has its own draw; edge counts differ, so edges are padded per slice with edges of a
  dummy node ``N`` that no real node reads);
* its initialisation: ``MaskedGraphAutoEncoder`` built under ``derive_seed(seed, "c2gmae", "init", *tag)``
  (the single model's weights, stacked along a leading slice dimension);
* its masks, corruption and PE noise, drawn from its own generator in the order of the single model
  (``derive_seed(seed, "c2gmae", "masks", *tag)``);
* its dropout: drawn from its own generator (``derive_seed(seed, "c2gmae", "dropout", *tag)``) in a fixed
  order and over its own edges only, so a slice's dropout does not depend on which other slices share its batch;
* its numbers, up to float rounding: kernels whose sizes follow the batch's padding (edge-feature and PE-head
  products, the PE loss's sum over the padded edges of the PE rungs) round differently with the batch (about 1e-7
  per step; GraphMAE's rung is bit-identical), and training amplifies that (about 1e-4 in a loss curve after 30
  epochs; rarely one probe prediction), so a seed's numbers move at that level when the seed count changes;
* its loss and gradient: the batch minimises the sum of the per-slice losses (slices share no parameter);
* its optimiser: Adam (L2 weight decay added to the gradient, as ``torch.optim.Adam``) acts elementwise with
  each slice's own learning rate.

Why not ``core.seedbatch.SeedBatch``: its ``vmap`` needs one input shape for every slice, while every seed has
its own graph with its own number of edges, and PyG's ``GATConv`` (scatter softmax, self-loop insertion) is
not written for ``vmap``. The layer here is PyG's ``GATConv`` written out on padded per-slice edge lists: the
same parameters (names and shapes), the same self loops (existing ones removed, one per node appended, their
edge features the mean of the node's incoming edges'), the same softmax over each node's incoming edges
(max-shifted, + 1e-16) and the same dropout sites; tests check it against ``GATConv`` to float tolerance.
After training each slice's weights load into a ``MaskedGraphAutoEncoder`` (probe and diagnostics unchanged).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from icmlrepro.core.seeding import derive_seed, seed_everything

from .heterophily import amplify
from .masking import density_partitioned_mask, uniform_mask
from .model import LADDER, GraphTensors, MaskedGraphAutoEncoder, gaussian_basis


def run_tag(rung_name: str, lr: float, init: int) -> tuple:
    """The key of one training's streams (the same as the single-model code's)."""
    return (rung_name, lr) if init == 0 else (rung_name, lr, "retrain", init)


def incidence(index: torch.Tensor, n_rows: int) -> torch.Tensor:
    """The [n_rows, len(index)] CSR matrix with a 1 at (index[e], e): summing rows into their index."""
    order = torch.argsort(index, stable=True)
    crow = torch.zeros(n_rows + 1, dtype=torch.long)
    crow[1:] = torch.bincount(index, minlength=n_rows).cumsum(0)
    return torch.sparse_csr_tensor(crow, order, torch.ones(index.numel()), (n_rows, index.numel()))


class Gather(torch.autograd.Function):
    """``x.index_select(0, index)`` whose backward sums through a precomputed CSR incidence (faster on CPU than
    ``index_add``)."""

    @staticmethod
    def forward(ctx, x, index, inc):
        ctx.inc = inc
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, g):
        return ctx.inc @ g.contiguous(), None, None


class Scatter(torch.autograd.Function):
    """Sum of the rows of ``v`` into rows ``index`` (``inc``: ``incidence(index, n)``)."""

    @staticmethod
    def forward(ctx, v, index, inc):
        ctx.index = index
        return inc @ v.contiguous()

    @staticmethod
    def backward(ctx, g):
        return g.index_select(0, ctx.index), None, None


def gather(x: torch.Tensor, index: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
    return Gather.apply(x.reshape(x.shape[0], -1), index, inc).view(index.numel(), *x.shape[1:])


def scatter(v: torch.Tensor, index: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
    return Scatter.apply(v.reshape(v.shape[0], -1), index, inc).view(inc.shape[0], *v.shape[1:])


class Aggregate(torch.autograd.Function):
    """out[i, h] = sum over edges e into i of alpha[e, h] * xs[src_e, h]: one sparse (CSR) product per head, so no
    [E, H, C] message tensor is built. Backward: the transposed product for ``xs``, the sampled product
    (``torch.sparse.sampled_addmm``) for ``alpha``."""

    @staticmethod
    def forward(ctx, alpha, xs, pg):
        ctx.save_for_backward(alpha, xs)
        ctx.pg = pg
        return torch.stack([pg.adjacency(alpha[:, h]) @ xs[:, h].contiguous() for h in range(xs.shape[1])], 1)

    @staticmethod
    def backward(ctx, g):
        alpha, xs = ctx.saved_tensors
        pg = ctx.pg
        g_alpha = g_xs = None
        if ctx.needs_input_grad[1]:
            g_xs = torch.stack([pg.adjacency(alpha[:, h], transpose=True) @ g[:, h].contiguous()
                                for h in range(xs.shape[1])], 1)
        if ctx.needs_input_grad[0]:
            g_alpha = torch.empty_like(alpha)
            for h in range(xs.shape[1]):
                sampled = torch.sparse.sampled_addmm(pg.pattern, g[:, h].contiguous(), xs[:, h].T.contiguous(),
                                                     beta=0.0)
                g_alpha[pg.order, h] = sampled.values()
        return g_alpha, g_xs, None


class PaddedGraphs:
    """K graphs with the same node count as padded tensors. Node ``N`` is a dummy: padding edges run from it
    to it, so no real node's attention or aggregation sees them. Edges: the real ones (padded to the largest
    count) then one self loop per real node."""

    def __init__(self, graphs: Sequence[GraphTensors]):
        k, n = len(graphs), graphs[0].x.shape[0]
        if any(g.x.shape[0] != n for g in graphs):
            raise ValueError("a batch needs graphs with the same number of nodes")
        counts = [int(g.edge_index.shape[1]) for g in graphs]
        emax = max(counts)
        self.k, self.n, self.n1, self.emax, self.counts = k, n, n + 1, emax, counts
        src = torch.full((k, emax), n, dtype=torch.long)
        dst = torch.full((k, emax), n, dtype=torch.long)
        self.dist = torch.zeros(k, emax)
        self.hetero = torch.zeros(k, emax)
        for i, g in enumerate(graphs):
            ei = g.edge_index
            if bool((ei[0] == ei[1]).any()):
                raise ValueError("graphs carry no self loops (GATConv removes them and adds its own)")
            src[i, :counts[i]], dst[i, :counts[i]] = ei[0], ei[1]
            self.dist[i, :counts[i]], self.hetero[i, :counts[i]] = g.dist, g.hetero
        self.valid = torch.arange(emax)[None, :] < torch.tensor(counts)[:, None]
        self.real_src, self.real_dst = src, dst
        loops = torch.arange(n).expand(k, n)
        self.src, self.dst = torch.cat([src, loops], 1), torch.cat([dst, loops], 1)
        self.bk = torch.arange(k)[:, None]
        self.offset = (torch.arange(k) * self.n1)[:, None]
        self.dst_flat = (self.dst + self.offset).reshape(-1)
        self.src_flat = (self.src + self.offset).reshape(-1)
        self.real_src_flat = (src + self.offset).reshape(-1)
        self.real_dst_flat = (dst + self.offset).reshape(-1)
        rows = k * self.n1
        self.src_inc, self.dst_inc = incidence(self.src_flat, rows), incidence(self.dst_flat, rows)
        self.real_src_inc, self.real_dst_inc = incidence(self.real_src_flat, rows), incidence(self.real_dst_flat, rows)
        # the attention matrix (row = target, column = source) in CSR, and its transpose
        self.order = torch.argsort(self.dst_flat * rows + self.src_flat, stable=True)
        self.order_t = torch.argsort(self.src_flat * rows + self.dst_flat, stable=True)
        self.crow = torch.zeros(rows + 1, dtype=torch.long)
        self.crow[1:] = torch.bincount(self.dst_flat, minlength=rows).cumsum(0)
        self.crow_t = torch.zeros(rows + 1, dtype=torch.long)
        self.crow_t[1:] = torch.bincount(self.src_flat, minlength=rows).cumsum(0)
        self.col, self.col_t = self.src_flat[self.order], self.dst_flat[self.order_t]
        self.pattern = torch.sparse_csr_tensor(self.crow, self.col, torch.ones(self.col.numel()), (rows, rows))
        self.in_count = torch.zeros(k * self.n1).index_add_(0, self.real_dst_flat, self.valid.float().reshape(-1))
        self.in_count = self.in_count.view(k, self.n1)[:, :n]
        pad = lambda t: torch.cat([t, torch.zeros(k, 1, *t.shape[2:], dtype=t.dtype)], 1)  # noqa: E731
        self.x = pad(torch.stack([g.x for g in graphs]))
        self.u = pad(torch.stack([g.u for g in graphs]))
        self.het_ratio = torch.stack([g.het_ratio for g in graphs])

    def adjacency(self, values: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        """Edge ``values`` (layout order) as the CSR matrix [target, source] (or its transpose)."""
        rows = self.k * self.n1
        if transpose:
            return torch.sparse_csr_tensor(self.crow_t, self.col_t, values[self.order_t], (rows, rows))
        return torch.sparse_csr_tensor(self.crow, self.col, values[self.order], (rows, rows))

    def scatter_sum(self, values: torch.Tensor, flat_index: torch.Tensor) -> torch.Tensor:
        """Sum of ``values`` [K, E, ...] into their nodes [K, N+1, ...] (``flat_index``: node + slice offset)."""
        k, e = values.shape[:2]
        inc = {id(self.dst_flat): self.dst_inc, id(self.real_dst_flat): self.real_dst_inc}[id(flat_index)]
        return scatter(values.reshape(k * e, *values.shape[2:]), flat_index, inc).view(k, self.n1, *values.shape[2:])

    def node_max(self, values: torch.Tensor) -> torch.Tensor:
        """Max of ``values`` [K, E, H] over each node's incoming edges (all edges), [K, N+1, H]."""
        k, e, h = values.shape
        out = values.new_full((k * self.n1, h), -math.inf)
        out = out.scatter_reduce(0, self.dst_flat[:, None].expand(-1, h), values.reshape(k * e, h), "amax",
                                 include_self=True)
        return out.view(k, self.n1, h)

    def with_loop_attr(self, attr: torch.Tensor) -> torch.Tensor:
        """Real edges' features [K, Emax, D] followed by the self loops' (mean of the node's incoming edges')."""
        sums = self.scatter_sum(attr * self.valid[..., None], self.real_dst_flat)[:, :self.n]
        return torch.cat([attr, sums / self.in_count.clamp(min=1.0)[..., None]], 1)


def gat(p: dict, prefix: str, x: torch.Tensor, pg: PaddedGraphs, heads: int, edge_attr: torch.Tensor | None,
        attn_keep: torch.Tensor | None, negative_slope: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """PyG ``GATConv`` (concat heads, bias, self loops) for K slices: x [K, N+1, F] -> [K, N+1, H*C]; also the
    attention [K, E, H]. ``attn_keep``: the dropout multipliers of the attention (None: no dropout).
    The edge term of the logit, (W_e a)·att_e summed over channels, is computed as a · (W_e^T att_e) (the same
    sum in another order), so no [E, H*C] edge tensor is built."""
    k, n1, _ = x.shape
    w = p[prefix + "lin.weight"]
    hc = w.shape[1]
    c = hc // heads
    xs = torch.bmm(x, w.transpose(1, 2))
    xh = xs.view(k, n1, heads, c)
    a_src = (xh * p[prefix + "att_src"]).sum(-1).reshape(k * n1, heads)
    a_dst = (xh * p[prefix + "att_dst"]).sum(-1).reshape(k * n1, heads)
    alpha = (gather(a_src, pg.src_flat, pg.src_inc) + gather(a_dst, pg.dst_flat, pg.dst_inc)).view(k, -1, heads)
    if edge_attr is not None:
        w_edge = p[prefix + "lin_edge.weight"]                        # [K, H*C, D]
        w_eff = (w_edge.view(k, heads, c, -1) * p[prefix + "att_edge"].view(k, heads, c, 1)).sum(2)  # [K, H, D]
        alpha = alpha + torch.bmm(edge_attr, w_eff.transpose(1, 2))
    alpha = F.leaky_relu(alpha, negative_slope)
    shift = pg.node_max(alpha.detach()).view(k * n1, heads)
    ex = (alpha - shift.index_select(0, pg.dst_flat).view(k, -1, heads)).exp()
    total = pg.scatter_sum(ex, pg.dst_flat).view(k * n1, heads) + 1e-16
    alpha = ex / gather(total, pg.dst_flat, pg.dst_inc).view(k, -1, heads)
    if attn_keep is not None:
        alpha = alpha * attn_keep
    out = Aggregate.apply(alpha.reshape(-1, heads), xs.view(k * n1, heads, c), pg).view(k, n1, hc)
    return out + p[prefix + "bias"].unsqueeze(1), alpha


def prelu(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """PReLU with one slope per slice (weight [K, 1])."""
    return torch.where(x >= 0, x, weight.view(-1, *([1] * (x.dim() - 1))) * x)


def linear(x: torch.Tensor, p: dict, prefix: str) -> torch.Tensor:
    out = torch.bmm(x, p[prefix + "weight"].transpose(1, 2))
    bias = p.get(prefix + "bias")
    return out if bias is None else out + bias.unsqueeze(1)


class DropoutPlan:
    """Where each slice's dropout draws go. One ``torch.rand`` per slice and step over its own sites (node
    features [N, F], attention over its own E_k + N edges, in a fixed order), laid out into padded tensors;
    padding positions keep 1. The keep rule is ``F.dropout``'s: keep with probability 1 - p, scale 1 / (1 - p)."""

    def __init__(self, pg: PaddedGraphs, sites: list[tuple[str, int, float]]):
        self.pg, self.sites = pg, sites  # (kind "in" | "att", width, p)
        self.shapes = [(pg.n1, w) if kind == "in" else (pg.emax + pg.n, w) for kind, w, _ in sites]
        self.total = sum(a * b for a, b in self.shapes)
        # per slice: the lengths of its drawn pieces and of the padding (ones) between them, in layout order
        self.pieces, self.sizes = [], []
        for i in range(pg.k):
            pieces = []
            for kind, w, _ in sites:
                if kind == "in":
                    pieces += [("draw", pg.n * w), ("pad", w)]
                else:
                    pieces += [("draw", pg.counts[i] * w), ("pad", (pg.emax - pg.counts[i]) * w), ("draw", pg.n * w)]
            self.pieces.append(pieces)
            self.sizes.append(sum(n for kind, n in pieces if kind == "draw"))
        self.ones = torch.ones(max(n for pieces in self.pieces for _, n in pieces))

    def draw(self, gens: Sequence[torch.Generator]) -> list[torch.Tensor | None]:
        parts = []
        for size, pieces, g in zip(self.sizes, self.pieces, gens):
            values, at = torch.rand(size, generator=g), 0
            for kind, n in pieces:
                if kind == "draw":
                    parts.append(values[at:at + n])
                    at += n
                elif n:
                    parts.append(self.ones[:n])
        buf = torch.cat(parts).view(self.pg.k, self.total)
        out, off = [], 0
        for (kind, width, p), shape in zip(self.sites, self.shapes):
            part = buf[:, off:off + shape[0] * shape[1]].view(self.pg.k, *shape)
            off += shape[0] * shape[1]
            out.append(None if p <= 0 else (part >= p).float() / (1.0 - p))
        return out


class BatchedAdam:
    """``torch.optim.Adam`` (L2 weight decay in the gradient) with one learning rate per slice."""

    def __init__(self, params: Sequence[torch.Tensor], lrs: torch.Tensor, weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params, self.lrs, self.wd, self.betas, self.eps = list(params), lrs, weight_decay, betas, eps
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        bc1, bc2_sqrt = 1 - b1 ** self.t, math.sqrt(1 - b2 ** self.t)
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            if self.wd:
                g = g.add(p, alpha=self.wd)
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            step = (self.lrs / bc1).view(-1, *([1] * (p.dim() - 1)))
            p.sub_(step * m / denom)
            p.grad = None


def epoch_draws(g: GraphTensors, rung, s: dict, gen: torch.Generator) -> dict:
    """One epoch's masks, corruption and PE noise, drawn from ``gen`` in the single model's order
    (mask, ``masking.corrupt``'s two permutations, then the PE noise)."""
    t, c = s["train"], s["c2gmae"]
    n = g.x.shape[0]
    masked = (density_partitioned_mask(g.bins, t["mask_rate"], gen) if rung.density
              else uniform_mask(n, t["mask_rate"], gen))
    m = masked.numel()
    n_replace = int(t["replace_rate"] * m)
    perm = masked[torch.randperm(m, generator=gen)]
    out = {"masked": masked, "token": perm[: m - n_replace], "replaced": perm[m - n_replace:]}
    out["source"] = torch.randperm(n, generator=gen)[:n_replace] if n_replace else perm[:0]
    if rung.pe:
        noise = (torch.rand(m, g.u.shape[1], generator=gen) * 2 - 1) * c["pe_noise"]
        if rung.hetero:
            noise = noise * (1.0 + c["kappa"] * g.het_ratio[masked])[:, None]
        out["noise"] = noise
    return out


class BatchedRung:
    """The loss of one rung for K slices (the ``MaskedGraphAutoEncoder.loss`` of each, summed)."""

    def __init__(self, rung_name: str, s: dict, pg: PaddedGraphs):
        self.rung, self.s, self.pg = LADDER[rung_name], s, pg
        m = s["model"]
        self.layers, self.heads = m["layers"], m["heads"]
        in_dim = pg.x.shape[2]
        widths = [in_dim] + [m["hidden"]] * (m["layers"] - 1)
        stream = []
        for w in widths:
            stream += [("in", w, m["in_drop"]), ("att", m["heads"], m["attn_drop"])]
        sites = stream + [("att", 1, m["attn_drop"])] + (stream if self.rung.pe else [])
        self.plan = DropoutPlan(pg, sites)

    def edge_attr(self, dist: torch.Tensor) -> torch.Tensor | None:
        """``MaskedGraphAutoEncoder.edge_attr`` on the padded real edges, then the self loops' mean features."""
        if not self.rung.pe:
            return None
        c, pg = self.s["c2gmae"], self.pg
        if self.rung.hetero:
            dist = amplify(dist, pg.hetero, c["beta"])
        feats = gaussian_basis(dist.reshape(-1), self.s["model"]["n_basis"], c["dist_max"]).view(pg.k, pg.emax, -1)
        if self.rung.hetero:
            feats = torch.cat([feats, c["gamma"] * pg.hetero[..., None]], dim=2)
        return pg.with_loop_attr(feats)

    def encoder(self, p: dict, x: torch.Tensor, edge_attr, keeps: list) -> torch.Tensor:
        h = x
        for i in range(self.layers):
            if keeps[2 * i] is not None:
                h = h * keeps[2 * i]
            h, _ = gat(p, f"encoder.convs.{i}.", h, self.pg, self.heads, edge_attr, keeps[2 * i + 1])
            h = prelu(h, p[f"encoder.acts.{i}.weight"])
        return h

    def losses(self, p: dict, d: dict, keeps: list) -> torch.Tensor:
        """Per-slice loss [K]. ``d``: the stacked epoch draws (masked [K, m], token / replaced masks [K, N+1],
        replacement sources [K, N+1], PE noise [K, N+1, k])."""
        s, pg = self.s, self.pg
        t, c = s["train"], s["c2gmae"]
        bk, masked = pg.bk, d["masked"]
        x = pg.x
        x_in = torch.where(d["token"][..., None], p["mask_token"],
                           torch.where(d["replaced"][..., None], x[bk, d["source"]], x))
        n_enc = 2 * self.layers
        h = self.encoder(p, x_in, self.edge_attr(pg.dist), keeps[:n_enc])
        z = torch.bmm(h, p["enc_to_dec.weight"].transpose(1, 2))
        z = torch.where(d["masked_nodes"][..., None], torch.zeros((), dtype=z.dtype), z)
        rec, _ = gat(p, "decoder.", z, pg, 1, None, keeps[n_enc])
        cos = (F.normalize(rec[bk, masked], p=2, dim=-1) * F.normalize(x[bk, masked], p=2, dim=-1)).sum(-1)
        loss = (1.0 - cos).pow(t["sce_gamma"]).mean(-1)
        if not self.rung.pe:
            return loss
        u_noisy = (pg.u + d["noise"]).reshape(pg.k * pg.n1, -1)
        dist = torch.linalg.vector_norm(u_noisy[pg.real_src_flat] - u_noisy[pg.real_dst_flat], dim=-1).view(pg.k, pg.emax)
        h = self.encoder(p, x, self.edge_attr(dist), keeps[n_enc + 1:]).reshape(pg.k * pg.n1, -1)
        # the PE head reads only the edges leaving masked nodes: per slice those edges first, padded to the
        # largest count with weight 0
        on = d["masked_nodes"][bk, pg.real_src] & pg.valid
        width = int(on.sum(1).max())
        order = torch.argsort((~on).to(torch.int8), dim=1, stable=True)[:, :width]
        weight = on.gather(1, order).float()
        sel = (order + bk * pg.emax).reshape(-1)
        i_src, i_dst = pg.real_src_flat.index_select(0, sel), pg.real_dst_flat.index_select(0, sel)
        rows = pg.k * pg.n1
        hs, hd = gather(h, i_src, incidence(i_src, rows)), gather(h, i_dst, incidence(i_dst, rows))
        hid = prelu(linear((hs - hd).abs().view(pg.k, width, -1), p, "pe_head.0."), p["pe_head.1.weight"])
        pred = linear(hid, p, "pe_head.2.").squeeze(-1)
        hetero = pg.hetero.gather(1, order)
        target = pg.dist.gather(1, order)
        if self.rung.hetero:
            target = amplify(target, hetero, c["beta"])
        per_edge = F.smooth_l1_loss(pred, target, reduction="none", beta=1.0)
        if self.rung.hetero:
            per_edge = per_edge * (1.0 + c["lambda_h"] * hetero)
        return loss + c["w_pe"] * (per_edge * weight).sum(-1) / weight.sum(-1)


def stack_draws(draws: list[dict], pg: PaddedGraphs) -> dict:
    """The K slices' draws of one epoch as padded tensors."""
    k, n1 = pg.k, pg.n1
    bk = pg.bk
    masked = torch.stack([d["masked"] for d in draws])
    out = {"masked": masked}
    for key, name in (("token", "token"), ("replaced", "replaced"), ("masked_nodes", "masked")):
        flags = torch.zeros(k, n1, dtype=torch.bool)
        idx = torch.stack([d[name] for d in draws])
        if idx.numel():
            flags[bk, idx] = True
        out[key] = flags
    source = torch.arange(n1).repeat(k, 1)
    rep = torch.stack([d["replaced"] for d in draws])
    if rep.numel():
        source[bk, rep] = torch.stack([d["source"] for d in draws])
    out["source"] = source
    if "noise" in draws[0]:
        noise = torch.zeros(k, n1, pg.u.shape[2])
        noise[bk, masked] = torch.stack([d["noise"] for d in draws])
        out["noise"] = noise
    return out


def train_batch(graphs: Sequence[GraphTensors], rung_name: str, runs: Sequence[tuple[int, float, int]],
                s: dict) -> list[dict]:
    """Train one rung for every ``(seed, lr, init)`` in ``runs`` (``graphs[i]``: run i's graph) as one batch.
    Returns per run: the trained ``MaskedGraphAutoEncoder``, the masked node ids of every epoch, the loss
    curve and the run's share of the batch's seconds."""
    start = time.perf_counter()
    rung, t = LADDER[rung_name], s["train"]
    in_dim = graphs[0].x.shape[1]
    models, gens, dgens = [], [], []
    for seed, lr, init in runs:
        tag = run_tag(rung_name, lr, init)
        seed_everything(derive_seed(seed, "c2gmae", "init", *tag))
        models.append(MaskedGraphAutoEncoder(in_dim, rung, s))
        gens.append(torch.Generator().manual_seed(derive_seed(seed, "c2gmae", "masks", *tag)))
        dgens.append(torch.Generator().manual_seed(derive_seed(seed, "c2gmae", "dropout", *tag)))
    names = [name for name, _ in models[0].named_parameters()]
    params = {name: torch.stack([dict(mod.named_parameters())[name].detach() for mod in models]).requires_grad_()
              for name in names}
    pg = PaddedGraphs(graphs)
    net = BatchedRung(rung_name, s, pg)
    opt = BatchedAdam(list(params.values()), torch.tensor([float(lr) for _, lr, _ in runs]), t["weight_decay"])
    histories, curves = [[] for _ in runs], []
    for _ in range(t["epochs"]):
        draws = [epoch_draws(g, rung, s, gen) for g, gen in zip(graphs, gens)]
        losses = net.losses(params, stack_draws(draws, pg), net.plan.draw(dgens))
        losses.sum().backward()
        opt.step()
        for hist, d in zip(histories, draws):
            hist.append(d["masked"].numpy().copy())
        curves.append(losses.detach())
    curves = torch.stack(curves).T.tolist()
    seconds = (time.perf_counter() - start) / len(runs)
    out = []
    for i, mod in enumerate(models):
        mod.load_state_dict({name: params[name][i].detach().clone() for name in names})
        out.append({"model": mod, "history": histories[i], "losses": curves[i], "seconds": seconds})
    return out
