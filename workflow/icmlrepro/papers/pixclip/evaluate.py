"""Every arm and seed on the test scenes (crops from unseen photo columns, held-out colour x texture pairs),
plus the untrained PixCLIP model of each seed as floor, and two controls on the same weights:
``@no_prompt`` (the region prompt removed: alpha all ones, i.e. the whole image; the CLIP-style arm sees the
unmasked image) and ``@truncated`` (captions cut at the short context). Each seed is scored on its own test
scenes (data redrawn per seed).

Tasks (PixCLIP's evaluation suite in miniature):
- masked-region classification: the region's texture (object category) among all textures, class text =
  mean of the normalised phrase embeddings over colours (prompt ensembling); mean per-class top-1 / top-5;
- region-to-text retrieval R@1: the region's phrase (colour + texture) among every possible phrase;
- referring expressions (zero-shot): given a phrase, pick its mask among the scene's masks;
- pixel grounding: each patch that a region covers for at least half its pixels is assigned to the phrase of
  its own scene (regions + background sentence) most similar to its dense feature; accuracy;
- long-text retrieval (full captions; a short-context tower cuts them) and global retrieval with short captions
  (every caption cut at the short context), image-to-text and text-to-image R@1, mean of the two.
Region models without an alpha channel (the CLIP-style arm) see the masked image instead (outside = mean grey).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from icmlrepro.core.io import read_npz, read_parquet, read_tokenizer, read_torch, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.tuning import at_grid_edge

from .data import COLORS, SHAPES, TEXTURES, heldout_combos, phrase
from .losses import patch_targets
from .model import RGB_MEAN, encode_ids
from .train import load_split, new_model, slot_texts

RANDOM = "random"  # the untrained PixCLIP model of each seed (floor)
IRREGULAR = ("blob", "polygon", "ring")
CHUNK = 128


def r_at_1(sim: torch.Tensor, target: np.ndarray) -> np.ndarray:
    """Whether each row's target column is ranked first (ties count against the query)."""
    own = sim[torch.arange(len(sim)), torch.as_tensor(target)]
    return ((sim >= own[:, None]).sum(1) == 1).numpy()


def topk_hits(sim: torch.Tensor, target: np.ndarray, k: int) -> np.ndarray:
    own = sim[torch.arange(len(sim)), torch.as_tensor(target)]
    return ((sim > own[:, None]).sum(1) < k).numpy()


def mean_per_class(hit: np.ndarray, cls: np.ndarray) -> float:
    """Mean over classes of the accuracy within each class (classes absent from ``cls`` are skipped)."""
    return float(np.mean([hit[cls == c].mean() for c in np.unique(cls)]))


def region_masks(te: dict, wrong: bool) -> torch.Tensor:
    """(R, H, W) mask of each test region, or of the wrong region (next region of the scene, or complement;
    kept for the tests: a wrong prompt is not a credible control, it must lose)."""
    rg = te["regions"]
    pos = {s: i for i, s in enumerate(te["scenes"]["scene"])}
    rows = np.array(rg["scene"].map(pos))
    n = te["n_objects"][rows]
    slot = np.array(rg["slot"])
    use = (slot + 1) % n if wrong else slot
    masks = te["labels"][rows] == torch.as_tensor(use + 1)[:, None, None]
    if wrong:
        alone = torch.as_tensor(n == 1)
        masks[alone] = ~masks[alone]
    return masks


@torch.no_grad()
def embed_regions(model, te: dict, masks: torch.Tensor) -> torch.Tensor:
    pos = {s: i for i, s in enumerate(te["scenes"]["scene"])}
    rows = torch.as_tensor(np.array(te["regions"]["scene"].map(pos)))
    out = []
    for i in range(0, len(rows), CHUNK):
        img, m = te["images"][rows[i:i + CHUNK]], masks[i:i + CHUNK].float()
        if model.vision.use_alpha:
            z, _ = model.vision(img, m)
        else:  # CLIP-style: the region cut out of the image
            z, _ = model.vision(img * m[:, None] + RGB_MEAN * (1 - m[:, None]), None)
        out.append(z)
    return F.normalize(torch.cat(out), dim=-1)


@torch.no_grad()
def embed_texts(model, tok, texts, context: int) -> torch.Tensor:
    ids = encode_ids(tok, texts, context)
    return torch.cat([model.encode_text(ids[i:i + CHUNK]) for i in range(0, len(ids), CHUNK)])


@torch.no_grad()
def embed_images(model, te: dict) -> tuple[torch.Tensor, torch.Tensor]:
    pooled, dense = zip(*(model.vision(te["images"][i:i + CHUNK], None, dense=True)
                          for i in range(0, len(te["images"]), CHUNK)))
    return F.normalize(torch.cat(pooled), dim=-1), F.normalize(torch.cat(dense), dim=-1)


def retrieval(img: torch.Tensor, txt: torch.Tensor, groups: dict[str, np.ndarray]) -> dict[str, float]:
    """Mean of image-to-text and text-to-image R@1 (the i-th caption belongs to the i-th image), per group
    of queries (the pool is always every test image / caption)."""
    sim = img @ txt.T
    target = np.arange(len(img))
    both = (r_at_1(sim, target).astype(float) + r_at_1(sim.T, target)) / 2
    return {g: float(both[m].mean()) if m.any() else float("nan") for g, m in groups.items()}


def region_scores(reg: torch.Tensor, phrases: torch.Tensor, te: dict) -> tuple[dict, np.ndarray]:
    """Classification and region-to-text metrics from region embeddings; also each region's retrieved phrase."""
    rg = te["regions"]
    names = [phrase(c, t) for c in COLORS for t in TEXTURES]
    textures = list(TEXTURES)
    cls_text = F.normalize(F.normalize(phrases, dim=-1).view(len(COLORS), len(TEXTURES), -1).mean(0), dim=-1)
    cls = rg["texture"].map({t: i for i, t in enumerate(textures)}).to_numpy()
    sim_c = reg @ cls_text.T
    top1, top5 = topk_hits(sim_c, cls, 1), topk_hits(sim_c, cls, 5)
    target = rg["phrase"].map({p: i for i, p in enumerate(names)}).to_numpy()
    sim_p = reg @ phrases.T
    hit = r_at_1(sim_p, target)
    out = {"region_cls_top1": mean_per_class(top1, cls), "region_cls_top5": mean_per_class(top5, cls),
           "region_text_r1": float(hit.mean())}
    shape = rg["shape"].to_numpy()
    for fam in SHAPES:
        out[f"region_text_r1.{fam}"] = float(hit[shape == fam].mean())
        out[f"region_cls_top1.{fam}"] = mean_per_class(top1[shape == fam], cls[shape == fam])
    irr = np.isin(shape, IRREGULAR)
    out["region_text_r1.irregular"] = float(hit[irr].mean())
    out["region_cls_top1.irregular"] = mean_per_class(top1[irr], cls[irr])
    held = rg["heldout_combo"].to_numpy()
    out["region_text_r1.heldout_combo"] = float(hit[held].mean()) if held.any() else float("nan")
    out["region_text_r1.seen_combo"] = float(hit[~held].mean())
    return out, np.asarray(names)[sim_p.argmax(1).numpy()]


def referring(reg: torch.Tensor, phrases: torch.Tensor, te: dict) -> float:
    """Each region's phrase picks one mask among its scene's masks (scenes with two or more regions)."""
    rg = te["regions"]
    names = {p: i for i, p in enumerate(phrase(c, t) for c in COLORS for t in TEXTURES)}
    hits = []
    for _, g in rg.groupby("scene"):
        if len(g) < 2:
            continue
        idx = g.index.to_numpy()
        sim = phrases[g["phrase"].map(names).to_numpy()] @ reg[idx].T  # phrase x mask
        hits += list(sim.argmax(1).numpy() == np.arange(len(idx)))
    return float(np.mean(hits))


def pixel_keep(te: dict, patch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, P) which patches pixel accuracy scores (covered at least half by one region) and their region slot."""
    shares = patch_targets(te["labels"], patch, te["slots"].shape[1] - 1)  # (N, P, k+1)
    best, lab = shares.max(-1)
    return (best >= 0.5) & (lab > 0), lab


def pixel_items(te: dict, patch: int) -> int:
    """How many patches pixel accuracy scores (the n of its standard error)."""
    return int(pixel_keep(te, patch)[0].sum())


def pixel_accuracy(dense: torch.Tensor, slot_emb: torch.Tensor, te: dict, patch: int) -> float:
    """Patches covered at least half by one region, assigned to the most similar phrase of their own scene."""
    slots = te["slots"]
    keep, lab = pixel_keep(te, patch)
    valid = slots >= 0
    phr = slot_emb[slots.clamp_min(0)]  # (N, k+1, E)
    sim = torch.einsum("npe,nke->npk", dense, phr).masked_fill(~valid[:, None, :], float("-inf"))
    return float((sim.argmax(-1) == lab)[keep].float().mean())


def no_prompt_masks(te: dict) -> torch.Tensor:
    """(R, H, W) all-ones masks: the region prompt removed (the whole image, Alpha-CLIP's default alpha)."""
    return torch.ones(len(te["regions"]), *te["labels"].shape[1:], dtype=torch.bool)


def score(model, te: dict, tok, s: dict) -> tuple[dict, dict]:
    """Every metric of one model, with the ``@no_prompt`` and ``@truncated`` controls; its predictions."""
    names = [phrase(c, t) for c in COLORS for t in TEXTURES]
    phrases = embed_texts(model, tok, names, model.context)
    reg = embed_regions(model, te, region_masks(te, wrong=False))
    bare = embed_regions(model, te, no_prompt_masks(te))
    img, dense = embed_images(model, te)
    out, pred = region_scores(reg, phrases, te)
    out["referring_acc"] = referring(reg, phrases, te)
    out["pixel_acc"] = pixel_accuracy(dense, embed_texts(model, tok, slot_texts(), model.context), te, s["patch_size"])
    out |= {f"{k}@no_prompt": v for k, v in region_scores(bare, phrases, te)[0].items()}
    out["referring_acc@no_prompt"] = referring(bare, phrases, te)
    beyond = te["scenes"]["beyond_short"].to_numpy()
    groups = {"": np.ones(len(beyond), bool), ".beyond_short": beyond, ".within_short": ~beyond}
    for suffix, ctx in (("", model.context), ("@truncated", s["short_context"])):
        res = retrieval(img, embed_texts(model, tok, te["captions"], ctx), groups)
        out |= {f"long_text_r1{g}{suffix}": v for g, v in res.items()}
    out["global_r1"] = out["long_text_r1@truncated"]  # the short-caption benchmark: every caption cut
    return out, {"retrieved": pred}


def metric_name(key: str, arm: str) -> str:
    """``region_text_r1.irregular@no_prompt`` of arm ``pixclip`` -> ``region_text_r1.pixclip.irregular@no_prompt``."""
    cut = min((i for i in (key.find("."), key.find("@")) if i >= 0), default=len(key))
    return f"{key[:cut]}.{arm}{key[cut:]}"


def chance_levels(te: dict, s: dict) -> dict[str, float]:
    """What a uniform random guess scores on each task (the trivial reference)."""
    n_obj = te["n_objects"]
    rg = te["regions"]
    multi = n_obj[rg["scene"].map({sc: i for i, sc in enumerate(te["scenes"]["scene"])}).to_numpy()]
    shares = patch_targets(te["labels"], s["patch_size"], te["slots"].shape[1] - 1)
    best, lab = shares.max(-1)
    keep = (best >= 0.5) & (lab > 0)
    per_patch = (1.0 / (torch.tensor(n_obj)[:, None] + 1.0)).expand_as(keep)[keep]
    return {"region_cls_top1": 1 / len(TEXTURES), "region_cls_top5": min(5, len(TEXTURES)) / len(TEXTURES),
            "region_text_r1": 1 / (len(TEXTURES) * len(COLORS)), "referring_acc": float(np.mean(1.0 / multi[multi > 1])),
            "pixel_acc": float(per_patch.mean()), "long_text_r1": 1 / len(te["captions"])}


def score_all(job, s: dict, tok, arrays, scenes, regions) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Long tables: (arm, seed, metric, value) and each region's retrieved phrase per arm and seed; and the chance
    levels of each seed's test scenes."""
    rows, preds, chance = [], [], {}
    vocab = tok.get_vocab_size()
    ckpt = {arm: read_torch(job.input[f"models_{arm}"]) for arm in s["arms"]}

    def add(arm, seed, model, seconds, te, norms=None):
        out, pred = score(model, te, tok, s)
        if norms:  # the summed loss's gradient norm before clipping to 1: the share of steps clipped, the median
            out["clipped_share"] = float(np.mean(np.asarray(norms) > 1.0))
            out["grad_norm_median"] = float(np.median(norms))
        rows.extend({"arm": arm, "seed": seed, "metric": k, "value": v} for k, v in out.items())
        rows.append({"arm": arm, "seed": seed, "metric": "train_seconds", "value": seconds})
        preds.append(pd.DataFrame({"arm": arm, "seed": seed, "scene": te["regions"]["scene"],
                                   "slot": te["regions"]["slot"], "retrieved": pred["retrieved"]}))

    for seed in s["seeds"]:
        te = load_split(arrays, scenes, regions, "test", s["max_objects"], seed)
        chance[seed] = chance_levels(te, s)
        add(RANDOM, seed, new_model("pixclip", s, vocab, seed).eval(), 0.0, te)
        for arm in s["arms"]:
            model = new_model(arm, s, vocab, seed)
            model.load_state_dict(ckpt[arm]["seeds"][seed]["state"])
            add(arm, seed, model.eval(), ckpt[arm]["seeds"][seed]["train_seconds"], te,
                ckpt[arm]["seeds"][seed].get("grad_norms"))
    for arm in s["arms"]:
        tun = ckpt[arm].get("tuning", {"grid": [s["lr"]], "scores": [float("nan")], "lr": s["lr"], "tied": []})
        grid = list(tun["grid"])
        info = {"tuned_lr": tun["lr"], "tuned_interior": float(not at_grid_edge(tun["lr"], grid)),
                "tuning_ties": float(max(len(tun["tied"]) - 1, 0)), "tuning_tie": float(tun.get("moved_by_tie", False)),
                "tuning_se": float(tun.get("tolerance", float("nan"))), "tuning_points": float(len(tun["scores"]))}
        info |= {f"val_score_lr{g:g}".replace(".", "p"): v for g, v in zip(grid, tun["scores"])}
        rows.extend({"arm": arm, "seed": seed, "metric": k, "value": v} for seed in s["seeds"] for k, v in info.items())
    return pd.DataFrame(rows), pd.concat(preds, ignore_index=True), chance


GRAD_KEYS = {"clipped_share": "share of training steps whose summed-loss gradient norm exceeded the clip (1)",
             "grad_norm_median": "median gradient norm of the summed branch losses before clipping"}
TUNING_KEYS = ("tuned_lr", "tuned_interior", "tuning_ties", "tuning_tie", "tuning_se", "tuning_points")


def build_metrics(table: pd.DataFrame, chance: dict, train_regions: pd.DataFrame, s: dict) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("pixclip", s["scale"], replicate="seed", replicates=seeds)
    t = table.set_index(["arm", "metric", "seed"])["value"].sort_index()

    def vals(arm, key):
        return [float(t.loc[(arm, key, sd)]) for sd in seeds]

    arms = [RANDOM, *s["arms"]]
    for arm in arms:
        label = "untrained PixCLIP (floor)" if arm == RANDOM else f"arm {arm}"
        for key in sorted(table.loc[table["arm"] == arm, "metric"].unique()):
            if key == "train_seconds" or key in TUNING_KEYS or key.startswith("val_score_lr"):
                continue
            if key in GRAD_KEYS:
                mf.add(metric_name(key, arm), vals(arm, key), unit="share" if key == "clipped_share" else "norm",
                       direction="none", description=f"{label}: {GRAD_KEYS[key]}")
                continue
            unit = "accuracy" if ("acc" in key or "cls" in key) else "R@1"
            mf.add(metric_name(key, arm), vals(arm, key), unit=unit, direction="higher",
                   description=f"{label}: {key} on the test scenes")
    for arm in s["arms"]:
        mf.add(f"train_seconds.{arm}", vals(arm, "train_seconds"), unit="s", direction="lower", timing=True,
               description=f"wall time of training arm {arm} for one seed (equal steps in every arm)")
        mf.add(f"tuned_lr.{arm}", vals(arm, "tuned_lr"), unit="lr", direction="none",
               description=f"arm {arm}: learning rate picked on the first seed's validation scenes from lr_grid")
        mf.add(f"tuned_interior.{arm}", vals(arm, "tuned_interior"), unit="indicator", direction="higher",
               description=f"arm {arm}: 1 if the picked learning rate is interior to lr_grid")
        mf.add(f"tuning_ties.{arm}", vals(arm, "tuning_ties"), unit="grid points", direction="none",
               description=f"arm {arm}: other grid points within one selection SE of the best validation score")
        mf.add(f"tuning_tie.{arm}", vals(arm, "tuning_tie"), unit="indicator", direction="none",
               description=f"arm {arm}: 1 if the tie rule moved the pick from the best-scoring rate toward lr")
        mf.add(f"tuning_points.{arm}", vals(arm, "tuning_points"), unit="grid points", direction="none",
               description=f"arm {arm}: learning rates trained by the expanding search on lr_grid (train.search_grid); 0 for "
                           f"an ablation, which trains at its method's rate (workflow_inputs.LR_FROM)")
        mf.add(f"tuning_se.{arm}", vals(arm, "tuning_se"), unit="score", direction="none",
               description=f"arm {arm}: standard error of the best validation score (the tie tolerance)")
        for key in sorted(k for k in table.loc[table["arm"] == arm, "metric"].unique() if k.startswith("val_score_lr")):
            mf.add(f"{key}.{arm}", vals(arm, key), unit="score", direction="higher",
                   description=f"arm {arm}: validation criterion (mean of its branches' tasks) at {key[9:]}")
    for key in chance[seeds[0]]:
        mf.add(f"{key}.chance", [chance[sd][key] for sd in seeds], unit="accuracy" if "acc" in key or "cls" in key
               else "R@1", direction="higher", description=f"uniform random guess on {key} (trivial reference)")
    if {"pixclip", "clip", "alphaclip"} <= set(s["arms"]):
        for key in ("region_cls_top1", "region_text_r1"):
            best = np.maximum(vals("clip", key), vals("alphaclip", key))
            mf.add(f"{key}_pixclip_minus_best_baseline", np.subtract(vals("pixclip", key), best), unit="accuracy",
                   direction="higher", description=f"{key}: PixCLIP minus the better of CLIP and Alpha-CLIP per seed")
        mf.add("global_r1_pixclip_minus_clip", np.subtract(vals("pixclip", "global_r1"), vals("clip", "global_r1")),
               unit="R@1", direction="higher",
               description="global retrieval with short captions (mean of I2T and T2I R@1), PixCLIP minus CLIP-style")
    leaks = heldout_leaks(train_regions, s["heldout_fraction"])
    mf.add("heldout_combo_regions_in_training", [float(leaks)] * len(seeds), unit="regions", direction="lower",
           description="training regions whose colour x texture pair is held out (the split's audit: must be 0)")
    return mf


def heldout_leaks(train_regions: pd.DataFrame, fraction: float) -> int:
    """Training regions whose colour x texture pair is one of the held-out pairs (recomputed from the names, not
    read from the generator's flag, so a mislabelled region is caught too)."""
    held = {f"{c} {t}" for c, t in heldout_combos(fraction)}
    return int((train_regions["color"] + " " + train_regions["texture"]).isin(held).sum())


def run(job) -> None:

    s = job.params
    tok = read_tokenizer(job.input.tokenizer)
    arrays = read_npz(job.input.arrays)
    scenes, regions = read_parquet(job.input.scenes), read_parquet(job.input.regions)
    table, preds, chance = score_all(job, s, tok, arrays, scenes, regions)
    write_parquet(job.output.scores, table)
    write_parquet(job.output.predictions, preds)
    build_metrics(table, chance, regions[regions["split"] == "train"], s).write(job.output.metrics)
