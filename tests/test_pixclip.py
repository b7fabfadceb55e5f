"""PixCLIP: the three branch losses on hand-computed cases, the zero-initialised alpha embedding (exactly the RGB
model at start, mask-sensitive once trained), CLIP truncation keeping [EOS], the annotation pipeline's split (no
held-out colour x texture pair and no test crop in training, a planted leak caught), the metrics on hand cases,
the prompt-removed control (it can win on a planted case), data redrawn per seed and the learning-rate pick. That a control's values in its metric's place do not reproduce a claim is checked
for every paper in tests/test_claims_registry.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icmlrepro.core.tuning import at_grid_edge
from icmlrepro.papers.pixclip import data, evaluate, losses, model, train

TINY = {"image_size": 48, "grid": 2, "patch_size": 8, "max_objects": 4, "heldout_fraction": 0.15, "n_train": 40,
        "n_val": 12, "n_test": 16, "short_context": 20, "long_context": 48, "width": 16, "vision_layers": 1,
        "text_layers": 1, "heads": 2, "embed_dim": 8, "steps": 2, "batch": 4, "lr": 0.002, "weight_decay": 0.05,
        "region_name_share": 0.5, "seeds": [0]}


@pytest.fixture(scope="module")
def generated():
    return data.generate(TINY)


def test_contrastive_on_a_hand_case_and_duplicates_are_not_negatives():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    scale = torch.tensor(2.0)
    c = 1 / math.sqrt(2)
    # logits (scale * cosine): row 0 [2, 2c], row 1 [0, 2c]; columns the same matrix transposed
    rows = [-math.log(math.exp(2) / (math.exp(2) + math.exp(2 * c))), -math.log(math.exp(2 * c) / (1 + math.exp(2 * c)))]
    cols = [-math.log(math.exp(2) / (math.exp(2) + 1)), -math.log(math.exp(2 * c) / (math.exp(2 * c) + math.exp(2 * c)))]
    expect = 0.5 * (np.mean(rows) + np.mean(cols))
    assert float(losses.contrastive(a, b, scale)) == pytest.approx(expect, rel=1e-6)
    # the same phrase twice: the other copy is masked, each row has only its own pair, loss 0
    assert float(losses.contrastive(a, b, scale, groups=torch.tensor([5, 5]))) == pytest.approx(0.0, abs=1e-6)


def test_region_texts_pair_category_names_and_never_make_a_true_text_a_negative():
    texts = train.slot_texts()
    tid = {t: i for i, t in enumerate(texts)}
    rows = [data.phrase("red", "brick"), data.phrase("blue", "brick"), data.phrase("red", "coin")]
    ids = torch.tensor([tid[t] for t in rows])
    assert [texts[i] for i in train.name_of(ids)] == ["a brick", "a brick", "a coin"]
    # share 0: the phrases themselves, nothing drawn from the stream; only identical phrases are not negatives
    rng = np.random.default_rng(0)
    out, true = train.region_texts(ids, 0.0, rng)
    assert torch.equal(out, ids) and torch.equal(true, torch.eye(3, dtype=torch.bool))
    assert rng.random() == np.random.default_rng(0).random()
    # share 1: every region paired with its category name; the two bricks' name is true of both, not the coin's
    out, true = train.region_texts(ids, 1.0, np.random.default_rng(0))
    assert [texts[i] for i in out] == ["a brick", "a brick", "a coin"]
    assert true.tolist() == [[True, True, False], [True, True, False], [False, False, True]]

    class Draw:  # the blue brick named, the other two keep their phrases
        def random(self, n):
            return np.array([0.9, 0.0, 0.9])[:n]

    out, true = train.region_texts(ids, 0.5, Draw())
    assert [texts[i] for i in out] == [rows[0], "a brick", rows[2]]
    # "a brick" (text 1) is true of the red brick (region 0); "a red brick" (text 0) is false of the blue brick
    assert true[0, 1] and not true[1, 0] and not true[2, 1] and not true[0, 2]
    # masked pairs leave the loss: two aligned regions whose texts are both true of both cost nothing
    emb = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    both = torch.ones(2, 2, dtype=torch.bool)
    assert float(losses.contrastive(emb, emb, torch.tensor(5.0), same=both)) == pytest.approx(0.0, abs=1e-6)
    assert float(losses.contrastive(emb, emb, torch.tensor(5.0))) == pytest.approx(math.log(2), rel=1e-6)


def test_patch_targets_are_pixel_shares_and_pixel_loss_on_a_hand_case():
    labels = torch.zeros(1, 4, 4, dtype=torch.long)
    labels[0, :2, :2] = 1        # patch 0 fully region 1
    labels[0, 0, 2:] = 2         # patch 1 half region 2, half background
    tgt = losses.patch_targets(labels, 2, 2)
    assert tgt.shape == (1, 4, 3)
    assert tgt[0, 0].tolist() == [0.0, 1.0, 0.0] and tgt[0, 1].tolist() == [0.5, 0.0, 0.5]
    assert torch.allclose(tgt.sum(-1), torch.ones(1, 4))
    patches = torch.tensor([[[1.0, 0.0]] * 4])
    phrases = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]])
    valid = torch.tensor([[True, True, False]])  # region 2's slot absent: excluded from the softmax
    t = torch.tensor([[[0.0, 1.0, 0.0]] * 4])
    # each patch: logits [s, 0] over (background, region 1); target region 1
    s = 3.0
    expect = -math.log(1 / (1 + math.exp(s)))
    assert float(losses.pixel_loss(patches, phrases, valid, t, torch.tensor(s))) == pytest.approx(expect, rel=1e-6)


def test_alpha_embedding_starts_as_the_rgb_model_and_then_reads_the_mask():
    torch.manual_seed(0)
    tower = model.VisionTower(TINY, use_alpha=True).eval()
    img = torch.rand(2, 3, 48, 48)
    mask = torch.zeros(2, 48, 48)
    mask[:, 8:24, 8:24] = 1
    with torch.no_grad():
        whole, _ = tower(img, None)
        region, _ = tower(img, mask)
        assert torch.allclose(whole, region, atol=1e-6)  # zero-initialised alpha: any mask, same output
        # the same RGB weights without the alpha branch give the same output too
        rgb = model.VisionTower(TINY, use_alpha=False).eval()
        rgb.load_state_dict({k.replace("patch_embedding.rgb.", "patch_embedding."): v
                             for k, v in tower.state_dict().items() if "patch_embedding.alpha" not in k})
        assert torch.allclose(rgb(img, None)[0], whole, atol=1e-6)
        tower.tower.embeddings.patch_embedding.alpha.weight.normal_()
        assert not torch.allclose(tower(img, mask)[0], tower(img, None)[0], atol=1e-3)


def test_truncation_keeps_eos_and_the_short_tower_pools_at_it(generated):
    tok = data.build_tokenizer()
    _, scenes, _ = generated
    long = scenes.loc[scenes["n_objects"] >= 2, "caption"].iloc[0]
    one = scenes.loc[scenes["n_objects"] == 1, "caption"].iloc[0]
    ids = model.encode_ids(tok, [long, one], TINY["short_context"])
    assert ids.shape[1] == TINY["short_context"] and ids[0, -1] == data.EOS
    assert (ids[1] == data.EOS).sum() == 1 and data.PAD in ids[1].tolist()
    # every one-object caption fits the short context, every longer one does not (the length split is exact)
    assert (scenes["beyond_short"] == (scenes["n_objects"] >= 2)).all()
    torch.manual_seed(0)
    tower = model.ShortTextTower(TINY, tok.get_vocab_size()).eval()
    alone = model.encode_ids(tok, [one], TINY["short_context"])  # no padding columns
    assert alone.shape[1] < ids.shape[1]
    with torch.no_grad():
        assert torch.allclose(tower(ids)[1], tower(alone)[0], atol=1e-5)  # padding after [EOS] changes nothing


def test_split_has_no_heldout_pair_or_test_crop_in_training(generated):
    arrays, scenes, regions = generated
    tr = regions[regions["split"] == "train"]
    assert evaluate.heldout_leaks(tr, TINY["heldout_fraction"]) == 0
    held = data.heldout_combos(TINY["heldout_fraction"])
    assert held and len({t for _, t in held}) == len(held)  # at most one held-out pair per texture
    planted = tr.copy()
    c, t = sorted(held)[0]
    planted.loc[planted.index[0], ["color", "texture"]] = [c, t]
    assert evaluate.heldout_leaks(planted, TINY["heldout_fraction"]) == 1
    # train and test crops come from disjoint columns of the photograph
    img = np.tile(np.arange(200.0), (60, 1))
    rng = np.random.default_rng(0)
    cut = int(200 * data.TRAIN_COLUMNS)
    assert all(data.crop(img, 16, "train", rng).max() < cut for _ in range(50))
    assert all(data.crop(img, 16, "test", rng).min() >= cut for _ in range(50))
    # label maps hold exactly the listed regions with their areas; phrases name colour and texture only
    for r in regions.head(20).itertuples(index=False):
        assert int((arrays["labels"][r.scene] == r.slot + 1).sum()) == r.area
        assert r.phrase == f"a {r.color} {r.texture}" and r.shape not in r.phrase
    # no scene repeats a colour x texture pair (a referring phrase names one mask)
    assert not regions.duplicated(["scene", "phrase"]).any()


def test_metrics_on_hand_cases():
    sim = torch.tensor([[0.9, 0.1, 0.9], [0.2, 0.8, 0.1]])
    assert evaluate.r_at_1(sim, np.array([0, 1])).tolist() == [False, True]  # a tie counts against
    assert evaluate.topk_hits(sim, np.array([0, 0]), 2).tolist() == [True, True]
    assert evaluate.topk_hits(sim, np.array([2, 0]), 1).tolist() == [True, False]
    # mean per class: class 0 1/2, class 1 1/1 -> 0.75 (plain accuracy would be 2/3)
    assert evaluate.mean_per_class(np.array([1, 0, 1]), np.array([0, 0, 1])) == pytest.approx(0.75)
    assert evaluate.metric_name("region_text_r1.irregular@no_prompt", "pixclip") == "region_text_r1.pixclip.irregular@no_prompt"
    assert evaluate.metric_name("pixel_acc", "clip") == "pixel_acc.clip"


def test_wrong_region_masks_are_never_the_right_region(generated):
    arrays, scenes, regions = generated
    te = train.load_split(arrays, scenes, regions, "test", TINY["max_objects"])
    right, wrong = evaluate.region_masks(te, False), evaluate.region_masks(te, True)
    assert right.shape == wrong.shape and right.any((1, 2)).all()
    assert not (right & wrong).any((1, 2)).any()  # no overlap at all: another object or the complement
    alone = te["n_objects"][regions[regions["split"] == "test"]["scene"].map(
        {s: i for i, s in enumerate(te["scenes"]["scene"])}).to_numpy()] == 1
    assert torch.equal(wrong[torch.as_tensor(alone)], ~right[torch.as_tensor(alone)])


def _tokenizer_and_splits(generated, *names):
    """The tokenizer and the named splits of the tiny generated data set, as training and scoring read them."""
    arrays, scenes, regions = generated
    return data.build_tokenizer(), *(train.load_split(arrays, scenes, regions, n, TINY["max_objects"]) for n in names)


def test_one_training_step_and_scoring_run_end_to_end(generated):
    tok, tr, te = _tokenizer_and_splits(generated, "train", "test")
    m, losses_ = train.train("pixclip", tr, tok, TINY, 0)
    assert len(losses_) == TINY["steps"] and all(np.isfinite(losses_))
    assert len(m.grad_norms) == TINY["steps"] and min(m.grad_norms) > 0  # recorded before clipping
    out, pred = evaluate.score(m, te, tok, TINY)
    assert 0 <= out["region_cls_top1"] <= 1 and out["global_r1"] == out["long_text_r1@truncated"]
    assert len(pred["retrieved"]) == len(te["regions"])
    # a short-context model sees the same text with or without the cut: its two long-text numbers agree
    clip, _ = train.train("clip", tr, tok, TINY, 0)
    out_c, _ = evaluate.score(clip, te, tok, TINY)
    assert out_c["long_text_r1"] == out_c["long_text_r1@truncated"]


def test_no_prompt_control_is_a_credible_competitor(generated):
    arrays, scenes, regions = generated
    te = train.load_split(arrays, scenes, regions, "test", TINY["max_objects"])
    assert evaluate.no_prompt_masks(te).all()  # the prompt removed: alpha all ones (the whole image)
    tok = data.build_tokenizer()
    m = train.new_model("pixclip", TINY, tok.get_vocab_size(), 0).eval()
    names = [data.phrase(c, t) for c in data.COLORS for t in data.TEXTURES]
    phrases = evaluate.embed_texts(m, tok, names, m.context)
    # without the cause (an alpha embedding that reads nothing, as at initialisation) the control ties exactly
    right = evaluate.embed_regions(m, te, evaluate.region_masks(te, False))
    bare = evaluate.embed_regions(m, te, evaluate.no_prompt_masks(te))
    assert torch.allclose(right, bare, atol=1e-6)
    # planted: whole-image embeddings that name each region's phrase beat prompted embeddings that do not
    target = te["regions"]["phrase"].map({p: i for i, p in enumerate(names)}).to_numpy()
    planted = phrases[torch.as_tensor(target)]
    noise = torch.nn.functional.normalize(torch.randn_like(planted), dim=-1)
    won, _ = evaluate.region_scores(planted, phrases, te)
    lost, _ = evaluate.region_scores(noise, phrases, te)
    assert won["region_text_r1"] == 1.0 and lost["region_text_r1"] < 0.5


def test_data_is_redrawn_per_seed_with_a_validation_split():
    arrays, scenes, regions = data.generate(TINY | {"seeds": [0, 1]})
    assert (scenes.groupby(["seed", "split"]).size().unstack().loc[:, ["train", "val", "test"]].to_numpy()
            == [[40, 12, 16]] * 2).all()
    a = train.load_split(arrays, scenes, regions, "train", 4, seed=0)
    b = train.load_split(arrays, scenes, regions, "train", 4, seed=1)
    assert not torch.equal(a["images"], b["images"]) and a["captions"] != b["captions"]
    # seed 0's scenes are the same whichever other seeds are drawn beside it
    alone, sc0, _ = data.generate(TINY)
    assert np.array_equal(alone["images"][sc0["split"] == "train"], a["images"].permute(0, 2, 3, 1).mul(255).round().byte().numpy())
    val = regions[regions["split"] == "val"]
    assert evaluate.heldout_leaks(val, TINY["heldout_fraction"]) == 0  # validation is drawn like training


def test_texture_stretch_widens_each_objects_grey_range_and_keeps_the_scenes():
    def spread(stretch):
        arrays, scenes, regions = data.generate(TINY | {"n_train": 12, "n_val": 0, "n_test": 0, "texture_stretch": stretch})
        out = []
        for r in regions.itertuples(index=False):
            px = arrays["images"][r.scene][arrays["labels"][r.scene] == r.slot + 1].max(-1).astype(float)
            out.append(np.percentile(px, 95) - np.percentile(px, 5))
        return np.array(out), scenes, regions

    flat, sc0, rg0 = spread(False)
    wide, sc1, rg1 = spread(True)
    assert sc0["caption"].tolist() == sc1["caption"].tolist() and rg0["shape"].tolist() == rg1["shape"].tolist()
    assert np.median(wide) > 1.5 * np.median(flat) and (wide >= flat - 1).mean() > 0.9


def test_learning_rate_pick_breaks_ties_to_the_default():
    assert train.pick_lr({0.001: 0.2, 0.002: 0.3, 0.004: 0.1}, 0.002).value == 0.002
    assert train.pick_lr({0.001: 0.4, 0.002: 0.3, 0.004: 0.4}, 0.002).value == 0.001
    assert train.pick_lr({0.001: 0.4, 0.002: 0.4, 0.004: 0.4}, 0.002).value == 0.002
    assert train.pick_lr({0.001: 0.1, 0.002: 0.3, 0.004: 0.5}, 0.002).value == 0.004
    # within the selection's SE a better edge score is a tie: the default wins and the move is recorded
    flat = {0.001: 0.461, 0.002: 0.458, 0.004: 0.458, 0.008: 0.40}
    assert train.pick_lr(flat, 0.002).value == 0.001
    tie = train.pick_lr(flat, 0.002, tolerance=0.01)
    assert tie.value == 0.002 and tie.moved_by_tie and tie.tied == [0.001, 0.002, 0.004]
    # a difference beyond the SE is not a tie
    assert train.pick_lr({0.001: 0.43, 0.002: 0.458, 0.004: 0.50, 0.008: 0.45}, 0.002, tolerance=0.01).value == 0.004


def test_expanding_grid_search_trains_only_what_the_scores_reach():
    grid = [0.0005, 0.001, 0.002, 0.004, 0.008]

    def planted(peak):
        calls = []

        def evaluate(lr):
            calls.append(lr)
            return -abs(math.log(lr / peak)), 0.01
        return calls, evaluate

    calls, ev = planted(0.002)  # optimum at the default: its two neighbours only
    assert list(train.search_grid(grid, 0.002, ev)) == [0.001, 0.002, 0.004] and len(calls) == 3
    calls, ev = planted(0.0005)  # below: one step at a time down to the grid's bottom, never the top
    done = train.search_grid(grid, 0.002, ev)
    assert list(done) == [0.0005, 0.001, 0.002, 0.004] and 0.008 not in calls
    assert train.pick_lr({g: v for g, (v, _) in done.items()}, 0.002).value == 0.0005
    assert at_grid_edge(0.0005, list(done))  # the grid's own edge stays an edge (tuned_interior 0)
    calls, ev = planted(0.004)  # above the default: 0.008 is trained to show 0.004 is interior
    done = train.search_grid(grid, 0.002, ev)
    assert list(done) == [0.001, 0.002, 0.004, 0.008] and not at_grid_edge(0.004, list(done))
    assert list(train.search_grid([0.002], 0.002, planted(0.01)[1])) == [0.002]  # one point: no tuning
    # the tie rule can move the pick to a searched edge (best 0.004, tied 0.001 wins on equal log distance, the
    # smaller): the search goes on below it, so a pick is never at a searched edge that is not the grid's edge
    table = {0.0005: (0.30, 0.02), 0.001: (0.389, 0.02), 0.002: (0.377, 0.02), 0.004: (0.398, 0.01), 0.008: (0.01, 0.01)}

    def choose(done):  # the rule run() passes
        return train.pick_searched(done, 0.002)[0].value
    done = train.search_grid(grid, 0.002, table.__getitem__, choose)
    assert list(done) == grid[:4] and choose(done) == 0.001 and not at_grid_edge(0.001, list(done))


def test_validation_score_has_the_selection_se(generated):
    tok, tr, val = _tokenizer_and_splits(generated, "train", "val")
    m, _ = train.train("pixclip_no_global", tr, tok, TINY, 0)
    score, se = train.validation_score("pixclip_no_global", m, val, tok, TINY)
    out, _ = evaluate.score(m, val, tok, TINY)
    assert score == pytest.approx((out["region_text_r1"] + out["pixel_acc"]) / 2)
    n_pix = evaluate.pixel_items(val, TINY["patch_size"])
    assert 0 < n_pix <= len(val["captions"]) * (TINY["image_size"] // TINY["patch_size"]) ** 2
    expect = math.sqrt(out["region_text_r1"] * (1 - out["region_text_r1"]) / len(val["regions"])
                       + out["pixel_acc"] * (1 - out["pixel_acc"]) / n_pix) / 2
    assert se == pytest.approx(expect)


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "pixclip", ("scores_per_arm.png", "shapes_and_lengths.png",
                                                       "example_regions.png"),
                                is_timing=lambda n: n.startswith("train_seconds"))
    assert metrics.get("heldout_combo_regions_in_training").values == [0.0] * len(metrics.replicates)
    assert metrics.get("region_text_r1.chance").values[0] == pytest.approx(1 / 30)  # 5 textures x 6 colours
    assert len(data.TEXTURES) * len(data.COLORS) == 30


def test_ablations_train_at_pixclips_tuned_rate(monkeypatch, tmp_path):
    """Each ablation reads PixCLIP's models file as an input and trains every seed at its picked rate, with no
    search of its own (tuning_points 0, the interior flag read on PixCLIP's searched rates); the other arms tune."""
    from icmlrepro.core.io import write_torch
    from icmlrepro.papers.pixclip import workflow_inputs as W

    settings = {"scale": "smoke", "arms": ["clip", "pixclip", "pixclip_no_region"]}
    assert W.pixclip_lr_source(settings, "pixclip_no_region") == {"tuned": "results/smoke/pixclip/train/pixclip/models.pt"}
    assert W.pixclip_lr_source(settings, "clip") == {} and W.pixclip_lr_source(settings, "pixclip") == {}
    assert W.pixclip_lr_source({**settings, "arms": ["pixclip_no_region"]}, "pixclip_no_region") == {}
    src = tmp_path / "pixclip.pt"
    write_torch(src, {"tuning": {"grid": [0.001, 0.002, 0.004], "scores": [0.1, 0.3, 0.2], "lr": 0.002}})
    trained = []

    class Stub:
        grad_norms: list = []

        def state_dict(self):
            return {}

    monkeypatch.setattr(train, "train", lambda arm, tr, tok, s, seed, lr: trained.append((seed, lr)) or (Stub(), [0.0]))
    monkeypatch.setattr(train, "load_split", lambda *a, **k: None)
    monkeypatch.setattr(train, "preload", lambda: None)
    for name, reader in (("read_tokenizer", None), ("read_npz", {}), ("read_parquet", None)):
        monkeypatch.setattr(train, name, lambda path, _r=reader: _r)
    saved = {}
    monkeypatch.setattr(train, "write_torch", lambda path, obj: saved.update(obj))
    from icmlrepro.core.cli import Job, Named

    job = Job("pixclip_train", input=Named(arrays="a", scenes="s", regions="r", tokenizer="t", tuned=str(src)),
              output=Named(models="m"), params=Named(seeds=[3, 4], lr=0.002, lr_grid=[0.001, 0.002, 0.004],
                                                     max_objects=4),
              wildcards=Named(arm="pixclip_no_region"))
    train.run(job)
    assert trained == [(3, 0.002), (4, 0.002)]
    tun = saved["tuning"]
    assert tun["lr"] == 0.002 and tun["scores"] == [] and tun["lr_from"] == "pixclip"
    assert not at_grid_edge(tun["lr"], tun["grid"])
