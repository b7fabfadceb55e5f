"""One arm, every seed: equal steps, batch, optimiser, schedule and initial vision weights in every arm.

Arms (what each one has): ``clip`` (no alpha channel, CLIP's short text tower, global branch on captions cut
at the short context: the CLIP-style baseline), ``alphaclip`` (alpha channel, short text tower, global +
region branches: the Alpha-CLIP-style baseline), ``pixclip`` (alpha channel, long-context LM text encoder,
global + region + pixel branches), and PixCLIP without each branch (``pixclip_no_global``, ``_no_region``,
``_no_pixel``).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_npz, read_parquet, read_tokenizer, read_torch, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import accuracy_se, pick_with_ties

from .data import BACKGROUNDS, COLORS, TEXTURES, phrase
from .losses import contrastive, patch_targets, pixel_loss
from .model import DualEncoder, encode_ids, preload
from .workflow_inputs import LR_FROM

BRANCHES = ("global", "region", "pixel")
ARMS = {  # arm: (alpha channel, long-text encoder, branches)
    "clip": (False, False, ("global",)),
    "alphaclip": (True, False, ("global", "region")),
    "pixclip": (True, True, BRANCHES),
    "pixclip_no_global": (True, True, ("region", "pixel")),
    "pixclip_no_region": (True, True, ("global", "pixel")),
    "pixclip_no_pixel": (True, True, ("global", "region")),
}


def slot_texts() -> list[str]:
    """Every text the region and pixel branches use: the background sentences, every region phrase (colour x
    texture, colour-major), then every category name ("a brick": a region's second description, region branch
    only)."""
    return ([f"a {b} background" for b in BACKGROUNDS] + [phrase(c, t) for c in COLORS for t in TEXTURES]
            + [category_name(t) for t in TEXTURES])


def category_name(texture: str) -> str:
    return f"a {texture}"


def name_of(text: torch.Tensor) -> torch.Tensor:
    """Index in ``slot_texts()`` of the category name of each region phrase index in ``text``."""
    nb, n_phrases = len(BACKGROUNDS), len(COLORS) * len(TEXTURES)
    return nb + n_phrases + (text - nb) % len(TEXTURES)


def region_texts(text: torch.Tensor, share: float, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The region branch's texts: each region's phrase (indices in ``slot_texts()``), replaced by its category
    name with probability ``share`` (Alpha-CLIP's RGBA pairs come from a grounding pipeline, region <-> phrase,
    and a classification pipeline, object <-> class name); and the (N, N) matrix ``true[i, j]``: text j describes
    region i (it is region i's phrase or its category name), so it is not one of region i's negatives. ``share`` 0
    draws nothing from ``rng`` and gives the phrases (then ``true`` = identical phrases)."""
    cat = name_of(text)
    out = text
    if share > 0:
        out = torch.where(torch.as_tensor(rng.random(len(text)) < share), cat, text)
    return out, (out[None, :] == text[:, None]) | (out[None, :] == cat[:, None])


def load_split(arrays, scenes: pd.DataFrame, regions: pd.DataFrame, split: str, max_objects: int,
               seed: int | None = None) -> dict:
    """Tensors of one split (of one seed's data when ``seed`` is given): images (N, 3, H, W) in [0, 1], label
    maps, captions, and per scene the index of its slot texts in ``slot_texts()`` (slot 0 background, 1..k
    regions, -1 absent)."""
    if seed is not None and "seed" in scenes:
        scenes, regions = scenes[scenes["seed"] == seed], regions[regions["seed"] == seed]
    sc = scenes[scenes["split"] == split].reset_index(drop=True)
    rg = regions[regions["split"] == split]
    idx = sc["scene"].to_numpy()
    text_id = {t: i for i, t in enumerate(slot_texts())}
    slots = np.full((len(sc), max_objects + 1), -1, dtype=np.int64)
    slots[:, 0] = [text_id[f"a {b} background"] for b in sc["background"]]
    pos = {s: i for i, s in enumerate(idx)}
    for r in rg.itertuples(index=False):
        slots[pos[r.scene], r.slot + 1] = text_id[r.phrase]
    return {"scenes": sc, "regions": rg.reset_index(drop=True),
            "images": torch.as_tensor(arrays["images"][idx]).permute(0, 3, 1, 2).float() / 255.0,
            "labels": torch.as_tensor(arrays["labels"][idx].astype(np.int64)),
            "captions": list(sc["caption"]), "slots": torch.as_tensor(slots), "n_objects": sc["n_objects"].to_numpy()}


def trim(ids: torch.Tensor) -> torch.Tensor:
    """Drop the columns that are padding in every row."""
    return ids[:, : max(int((ids != 0).sum(1).max()), 1)]


def new_model(arm: str, s: dict, vocab: int, seed: int) -> DualEncoder:
    """The seed's initial model: the vision tower's RGB weights are the same in every arm of a seed."""
    use_alpha, long_text, _ = ARMS[arm]
    torch.manual_seed(derive_seed(seed, "pixclip", "init"))
    return DualEncoder(s, vocab, use_alpha, long_text)


def lr_at(step: int, s: dict) -> float:
    """Linear warm-up over the first 10% of steps, then cosine decay to 0 (multiplier of ``lr``)."""
    warm = max(1, s["steps"] // 10)
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, s["steps"] - warm)))


def step_loss(model: DualEncoder, tr: dict, b: np.ndarray, branches, s: dict, cap_ids: torch.Tensor,
              slot_ids: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """The sum of the enabled branches' losses on scenes ``b``."""
    scale = model.logit_scale.exp().clamp(max=100.0)
    images, labels = tr["images"][b], tr["labels"][b]
    loss = torch.zeros(())
    if "global" in branches or "pixel" in branches:
        pooled, patches = model.vision(images, None, dense="pixel" in branches)
        if "global" in branches:
            loss = loss + contrastive(pooled, model.text(trim(cap_ids[b])), scale)
        if "pixel" in branches:
            slots = tr["slots"][b]
            valid = slots >= 0
            used, inv = torch.unique(slots[valid], return_inverse=True)
            emb = model.text(trim(slot_ids[used]))
            phr = torch.zeros(*slots.shape, emb.shape[-1])
            phr[valid] = emb[inv]
            tgt = patch_targets(labels, s["patch_size"], slots.shape[1] - 1)
            loss = loss + pixel_loss(patches, phr, valid, tgt, scale)
    if "region" in branches:
        rows = np.arange(len(b))  # one region per scene, drawn at random
        k = np.array([rng.integers(n) for n in tr["n_objects"][b]])
        alpha = (labels[rows] == torch.as_tensor(k + 1)[:, None, None]).float()
        text, same = region_texts(tr["slots"][b][rows, k + 1], s["region_name_share"], rng)
        pooled, _ = model.vision(images[rows], alpha)
        uniq, inv = torch.unique(text, return_inverse=True)
        loss = loss + contrastive(pooled, model.text(trim(slot_ids[uniq]))[inv], scale, same=same)
    return loss


def train(arm: str, tr: dict, tok, s: dict, seed: int, lr: float | None = None) -> tuple[DualEncoder, list[float]]:
    """Train one arm on one seed's training scenes at learning rate ``lr`` (default ``s["lr"]``); the same stream
    of batches for every learning rate of the grid."""
    rng = seed_everything(derive_seed(seed, "pixclip", "train", arm))
    model = new_model(arm, s, tok.get_vocab_size(), seed)
    branches = ARMS[arm][2]
    cap_ids = encode_ids(tok, tr["captions"], model.context)
    slot_ids = encode_ids(tok, slot_texts(), model.context)
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"] if lr is None else lr, weight_decay=s["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: lr_at(i, s))
    n, losses, norms = len(tr["captions"]), [], []
    model.train()
    for _ in range(s["steps"]):
        b = rng.choice(n, size=min(s["batch"], n), replace=False)
        loss = step_loss(model, tr, b, branches, s, cap_ids, slot_ids, rng)
        opt.zero_grad()
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))  # the norm before clipping
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.grad_norms = norms  # per step, before clipping to 1 (every branch shares one clipped step)
    return model.eval(), losses


VALIDATION_METRIC = {"global": "long_text_r1", "region": "region_text_r1", "pixel": "pixel_acc"}


def validation_score(arm: str, model: DualEncoder, val: dict, tok, s: dict) -> tuple[float, float]:
    """The arm's tuning criterion and its standard error: the mean, over the branches it trains, of that branch's
    task on the validation scenes (global: retrieval with full captions over the validation scenes, region:
    region-to-text R@1 over the validation regions, pixel: pixel accuracy over the scored patches); the SE of the
    mean combines each task's binomial SE (``core.tuning.accuracy_se``) as independent."""
    from .evaluate import pixel_items, score  # evaluate imports this module

    out, _ = score(model, val, tok, s)
    n = {"global": len(val["captions"]), "region": len(val["regions"]), "pixel": pixel_items(val, s["patch_size"])}
    branches = ARMS[arm][2]
    vals = [out[VALIDATION_METRIC[b]] for b in branches]
    se = math.sqrt(sum(accuracy_se(v, n[b]) ** 2 for v, b in zip(vals, branches))) / len(branches)
    return float(np.mean(vals)), float(se)


def pick_lr(scores: dict[float, float], default: float, tolerance: float = 0.0):
    """The grid point with the best validation score; scores within ``tolerance`` (the selection's SE) of the
    best tie, and ties go to the configured default, then to the rate nearest it (``core.tuning.pick_with_ties``).
    Returns the ``Pick`` (value, tied rates, best by score alone, whether the tie rule moved it)."""
    return pick_with_ties(list(scores), list(scores.values()), default, tolerance=tolerance)


def pick_searched(done: dict[float, tuple[float, float]], default: float):
    """The pick over searched points ``{lr: (score, se)}`` (the search's steps and the final choice alike): ties
    within the SE of the best score (the selection's noise) go to ``default``. Returns (``Pick``, that SE)."""
    tolerance = done[max(done, key=lambda g: done[g][0])][1]
    return pick_lr({g: v[0] for g, v in done.items()}, default, tolerance), tolerance


def search_grid(grid, default: float, evaluate, choose=None) -> dict[float, tuple[float, float]]:
    """Expanding search on the sorted ``grid``: the default and its two neighbours first, then one more point beyond
    whichever evaluated edge holds the pick, until the pick is interior to the evaluated points or at the grid's own
    edge. ``evaluate(lr) -> (score, se)``; ``choose({lr: (score, se)}) -> lr`` is the pick (default: the best score;
    ``run`` passes the tie rule, which can move the pick to a searched edge too); returns {lr: (score, se)} of the
    evaluated points (a contiguous stretch of the grid). Every arm runs the same rule on the same grid."""
    if choose is None:
        choose = lambda done: max(done, key=lambda g: (done[g][0], -g))  # noqa: E731
    grid = sorted(float(g) for g in grid)
    d = min(range(len(grid)), key=lambda i: abs(math.log(grid[i] / default)))
    lo, hi = max(d - 1, 0), min(d + 1, len(grid) - 1)
    done = {grid[i]: evaluate(grid[i]) for i in range(lo, hi + 1)}
    while True:
        best = grid.index(choose(done))
        if best == lo and lo > 0:
            lo -= 1
            done[grid[lo]] = evaluate(grid[lo])
        elif best == hi and hi < len(grid) - 1:
            hi += 1
            done[grid[hi]] = evaluate(grid[hi])
        else:
            return dict(sorted(done.items()))


def run(job) -> None:

    s, arm = job.params, job.wildcards.arm
    tok = read_tokenizer(job.input.tokenizer)
    arrays = read_npz(job.input.arrays)
    scenes, regions = read_parquet(job.input.scenes), read_parquet(job.input.regions)
    split = lambda name, seed: load_split(arrays, scenes, regions, name, s["max_objects"], seed)  # noqa: E731
    out = {"arm": arm, "seeds": {}}
    preload()
    # learning rate: every arm gets the same grid, tuned on the first seed's validation scenes; the run at the
    # picked rate is that seed's model (selection on validation, report on test)
    # (expanding search on the grid: the points an arm's scores never reach are not trained; grid = evaluated points)
    first, full = s["seeds"][0], sorted(s.get("lr_grid", [s["lr"]]))
    tr, val = split("train", first), split("val", first)
    runs = {}
    if "tuned" in job.input:  # an ablation: its method's tuned rate, nothing else changed (LR_FROM)
        src = read_torch(job.input.tuned)["tuning"]
        out["tuning"] = {"grid": list(src["grid"]), "full_grid": full, "scores": [], "ses": [], "lr": src["lr"],
                         "tolerance": float("nan"), "tied": [], "moved_by_tie": False, "lr_from": LR_FROM[arm]}
        train_seeds(arm, split, tok, s, out, src["lr"], {})
        write_torch(job.output.models, out)
        return

    def fit(lr):
        t0 = time.perf_counter()
        model, losses = train(arm, tr, tok, s, first, lr)
        runs[lr] = (model, losses, time.perf_counter() - t0)
        return validation_score(arm, model, val, tok, s) if len(full) > 1 else (float("nan"),) * 2

    done = search_grid(full, s["lr"], fit, lambda pts: pick_searched(pts, s["lr"])[0].value)
    grid = list(done)
    tuning, ses = {g: v[0] for g, v in done.items()}, {g: v[1] for g, v in done.items()}
    if len(grid) > 1:
        pick, tol = pick_searched(done, s["lr"])
        lr, tied, moved = pick.value, pick.tied, pick.moved_by_tie
    else:
        tol, lr, tied, moved = float("nan"), grid[0], [], False
    out["tuning"] = {"grid": grid, "full_grid": full, "scores": [tuning[g] for g in grid], "ses": [ses[g] for g in grid], "lr": lr,
                     "tolerance": tol, "tied": tied, "moved_by_tie": bool(moved)}
    train_seeds(arm, split, tok, s, out, lr, {first: runs[lr]})
    write_torch(job.output.models, out)


def train_seeds(arm: str, split, tok, s: dict, out: dict, lr: float, done: dict) -> None:
    """Every seed's model at ``lr`` into ``out["seeds"]``; ``done``: seeds already trained at that rate."""
    for seed in s["seeds"]:
        if seed in done:
            model, losses, seconds = done[seed]
        else:
            t0 = time.perf_counter()
            model, losses = train(arm, split("train", seed), tok, s, seed, lr)
            seconds = time.perf_counter() - t0
        out["seeds"][seed] = {"state": model.state_dict(), "losses": losses, "train_seconds": seconds,
                              "grad_norms": model.grad_norms}
