"""TopAdapter: the simplex generator on hand-computed patches (offsets, edges, triangle normals and areas),
FPS/kNN grouping, rotation augmentation, the adapter's invariants (zero-initialised injection leaves the frozen
model unchanged, ToTransfer is the only difference of its ablation, the fixed-fusion gate ignores the input,
the noise control keeps shapes, statistics and parameters but not the topology), frozen parameters per arm,
the split audits (a planted duplicate cloud is caught), learning-rate selection, and the claims' controls."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.core.claims import load_claims
from icmlrepro.papers.topadapter import data, evaluate, fitting, geometry, method, shapes, train

S = dict(data_seed=0, n_points=128, n_groups=8, group_size=8, pretrain_per_class=2, train_per_class=2,
         val_per_class=1, test_per_class=2, keep_range=[0.55, 0.85], clutter_range=[0.05, 0.15], jitter=0.01,
         pretrain_jitter=0.005, tilt_deg=15, d=16, depth=2, heads=2, mlp_ratio=2, patch_hidden=8, batch=8,
         pretrain_epochs=1, pretrain_lr=1e-3, epochs=1, lr_grid=[1e-3], adapter_dim=4, n_prompts=2, k_patches=3,
         topo_dim=4, scales=[4, 8], lora_rank=2, seeds=[0], seed_batch=2, lr_default=1e-3, match_params=True)


@pytest.fixture(scope="module")
def dataset():
    return data.build(S)


def test_simplex_features_on_a_hand_made_planar_patch():
    # centre at the origin, three points: (1,0,0), (0,2,0), (0,0,0)+ a copy shifted: a patch in the z = 0 plane
    rel = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 2.0, 0.0]]).view(1, 1, 4, 3)
    f0, f1, f2 = geometry.simplex_features(rel, 4)
    r = math.sqrt(5.0)  # patch radius: the farthest vertex (1, 2, 0)
    assert f0[0, 0, :, 3].tolist() == pytest.approx([0.0, 1 / r, 2 / r, 1.0])
    assert f0[0, 0, 1, :3].tolist() == pytest.approx([1 / r, 0.0, 0.0])
    # vertex 0's nearest other vertex is (1,0,0): edge (1,0,0), length 1
    assert f1[0, 0, 0].tolist() == pytest.approx([1 / r, 0.0, 0.0, 1 / r])
    # every triangle lies in z = 0: n n^T = e_z e_z^T (upper triangle xx, xy, xz, yy, yz, zz) whatever the sign
    assert torch.allclose(f2[0, 0, :, :6], torch.tensor([0.0, 0, 0, 0, 0, 1]).expand(4, 6), atol=1e-6)
    # vertex 0's triangle: (0,0,0), (1,0,0), (0,2,0): area 1, divided by r^2
    assert float(f2[0, 0, 0, 6]) == pytest.approx(1.0 / 5.0)
    # a scale of k uses the k nearest vertices only
    g0, _, _ = geometry.simplex_features(rel, 3)
    assert g0.shape[-2] == 3 and float(g0[0, 0, :, 3].max()) == pytest.approx(1.0)


def test_simplex_invariants_under_rotation_and_scale():
    g = torch.Generator().manual_seed(0)
    rel = torch.randn(2, 3, 8, 3, generator=g)
    rel = rel[..., rel.norm(dim=-1)[0, 0].argsort(), :]
    R = torch.linalg.qr(torch.randn(3, 3, generator=g))[0]
    a = geometry.simplex_features(rel, 8)
    b = geometry.simplex_features(2.5 * rel @ R.T, 8)
    for fa, fb in zip(a, b):  # lengths and areas: rotation and scale invariant
        assert torch.allclose(fa[..., -1], fb[..., -1], atol=1e-4)
    assert torch.allclose(a[0][..., :3] @ R.T, b[0][..., :3], atol=1e-4)  # offsets rotate with the cloud
    assert torch.allclose(a[1][..., :3] @ R.T, b[1][..., :3], atol=1e-4)  # so do edges


def test_fps_and_knn_on_a_line():
    pts = torch.tensor([[0.0], [1.0], [2.0], [10.0], [4.0]]).repeat(1, 3).unsqueeze(0) * torch.tensor([1.0, 0, 0])
    assert geometry.fps(pts, 3)[0].tolist() == [0, 3, 4]  # start, farthest, then farthest from both
    centers, rel = geometry.patches(pts, 2, 2)
    assert rel.shape == (1, 2, 2, 3) and torch.allclose(rel[0, :, 0], torch.zeros(2, 3))  # centre first
    assert float(rel[0, 0, 1, 0]) == pytest.approx(1.0) and float(rel[0, 1, 1, 0]) == pytest.approx(-6.0)


def test_rotation_augmentation_is_a_rotation_about_z():
    rel, cen = torch.tensor([[[[1.0, 0.0, 2.0]]]]), torch.tensor([[[0.0, 1.0, 3.0]]])
    r2, c2 = fitting.rotate_z(rel, cen, torch.tensor([math.pi / 2]))
    assert r2[0, 0, 0].tolist() == pytest.approx([0.0, 1.0, 2.0], abs=1e-6)
    assert c2[0, 0].tolist() == pytest.approx([-1.0, 0.0, 3.0], abs=1e-6)


def _batch(dataset, n=4):
    d = dataset["downstream"]["train"]
    return d["rel"][:n], d["centers"][:n]


def test_topadapter_starts_as_the_frozen_model_and_each_ablation_changes_one_thing(dataset):
    rel, cen = _batch(dataset)
    torch.manual_seed(0)
    state = train.new_backbone(S).state_dict()
    torch.manual_seed(1)
    head = train.build("head", state, S, 8).eval()
    torch.manual_seed(1)
    ta = train.build("topadapter", state, S, 8).eval()
    ta.head.load_state_dict(head.head.state_dict())
    with torch.no_grad():
        assert torch.allclose(head(rel, cen), ta(rel, cen), atol=1e-6)  # zero-initialised injection
        for p in ta.adapter.inject:
            p.weight.normal_(std=0.3)
        assert not torch.allclose(head(rel, cen), ta(rel, cen), atol=1e-4)
        # ToTransfer is the only difference: the same weights without carrying the state give other outputs
        # from the third block on (the state entering blocks 1 and 2 is the same either way) ...
        three = {**S, "depth": 3}
        a, b = (train.build(v, train.new_backbone(three).state_dict(), three, 8).eval() for v in ("topadapter", "no_totransfer"))
        for p in a.adapter.inject:
            p.weight.normal_(std=0.3)
        b.load_state_dict(a.state_dict())
        assert not torch.allclose(a(rel, cen), b(rel, cen), atol=1e-5)
        # ... and with two blocks nothing is carried that is used
        nt = train.build("no_totransfer", state, S, 8).eval()
        nt.load_state_dict(ta.state_dict())
        assert torch.allclose(nt(rel, cen), ta(rel, cen), atol=1e-6)


def test_controller_gate_depends_on_the_input_and_fixed_fusion_does_not():
    g = torch.Generator().manual_seed(0)
    h1, h2, s = torch.randn(2, 5, 16, generator=g), torch.randn(2, 5, 16, generator=g), torch.randn(2, 5, 4, generator=g)
    dyn = method.TopAdapter(16, 2, 4, 4, [4, 8], "full")
    fixed = method.TopAdapter(16, 2, 4, 4, [4, 8], "fixed_fusion")
    assert not torch.allclose(dyn.controller(0, h1, s), dyn.controller(0, h2, s))
    assert torch.equal(fixed.controller(0, h1, s), fixed.controller(0, h2, s))
    assert ((dyn.controller(0, h1, s) > 0) & (dyn.controller(0, h1, s) < 1)).all()


def test_noise_control_keeps_shapes_statistics_and_parameters_but_not_the_topology(dataset):
    rel, _ = _batch(dataset, 8)
    real = method.SimplexGenerator([4, 8], (0, 1, 2), 4).raw(rel)
    noisy_gen = method.SimplexGenerator([4, 8], (0, 1, 2), 4, noise=True)
    noisy_gen.gen = torch.Generator().manual_seed(0)
    noisy = noisy_gen.raw(rel)
    for name in real:
        a, b = real[name].reshape(-1, real[name].shape[-1]), noisy[name].reshape(-1, real[name].shape[-1])
        assert real[name].shape == noisy[name].shape
        assert torch.allclose(a.mean(0), b.mean(0), atol=0.15) and torch.allclose(a.std(0), b.std(0), rtol=0.25, atol=0.05)
        corr = [abs(float(np.corrcoef(a[:, c], b[:, c])[0, 1])) for c in range(a.shape[1]) if a[:, c].std() > 1e-6]
        assert max(corr) < 0.2  # the noise carries none of the geometry
    counts = {arm: fitting.count_params(train.build(arm, train.new_backbone(S).state_dict(), S, 8))[0]
              for arm in ("topadapter", "noise_topology", "no_totransfer")}
    assert counts["topadapter"] == counts["noise_topology"] == counts["no_totransfer"]


@pytest.mark.parametrize("arm", ["head", "full_ft", "lora", "dapt", "topadapter"])
def test_only_the_arms_parameters_train(dataset, arm):
    torch.manual_seed(0)
    state = train.new_backbone(S).state_dict()
    model = train.build(arm, state, S, 8)
    before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    fitting.fit(model, dataset["downstream"]["train"], 1, 8, 1e-2, np.random.default_rng(0))
    after = model.backbone.state_dict()
    frozen_changed = [k for k in before if "lora_" not in k and not torch.equal(before[k], after[k])]
    if arm == "full_ft":
        assert frozen_changed
    else:
        assert not frozen_changed, frozen_changed[:3]
    trainable, total = fitting.count_params(model)
    assert (trainable == total) == (arm == "full_ft")
    if arm == "lora":
        assert any("lora_" in k and not torch.equal(before[k], after[k]) for k in before)


def test_each_seed_draws_its_own_clouds(dataset):
    """Replicates redraw the data (checklist 18): seed 1's clouds share none with seed 0's, same classes and sizes."""
    other = data.build(S, seed=1)
    for dom in ("pretrain", "downstream"):
        a, b = dataset[dom]["train"], other[dom]["train"]
        assert a["points"].shape == b["points"].shape and torch.equal(a["labels"], b["labels"])
        assert data.shared_clouds(a["points"], b["points"]) == 0
    assert torch.equal(data.build(S, seed=0)["downstream"]["test"]["points"], dataset["downstream"]["test"]["points"])


def test_domains_are_disjoint_and_a_planted_duplicate_cloud_is_caught(dataset):
    assert not set(shapes.PRETRAIN_CLASSES) & set(shapes.DOWNSTREAM_CLASSES)
    down = dataset["downstream"]
    assert data.shared_clouds(down["train"]["points"], down["test"]["points"]) == 0
    assert data.shared_clouds(down["train"]["points"], down["val"]["points"]) == 0
    planted = torch.cat([down["test"]["points"], down["train"]["points"][3:4]])
    assert data.shared_clouds(down["train"]["points"], planted) == 1
    # clouds are normalised into the unit ball, the hard split carries its floor clutter
    assert float(down["test"]["points"].norm(dim=-1).amax()) == pytest.approx(1.0, abs=1e-5)
    assert down["train"]["rel"].shape[1:] == (S["n_groups"], S["group_size"], 3)


def test_learning_rate_is_picked_on_validation_and_the_edge_is_flagged_per_seed():
    rows = []
    for arm in ("head", "topadapter", "full_ft"):
        for seed in (0, 1):
            for i, lr in enumerate((1e-3, 3e-3, 1e-2)):
                val = {"head": [0.1, 0.3, 0.2], "topadapter": [0.1, 0.2, 0.3], "full_ft": [0.3, 0.2, 0.1]}[arm][i]
                rows.append({"arm": arm, "seed": seed, "lr": lr, "val_acc": val, "test_acc": val + 0.01 * seed,
                             "train_seconds": 1.0, "final_loss": 0.5 + seed, "chosen": None, "trainable": 10,
                             "total": 100, "tie": arm == "head", "train_acc": val + 0.5, "loss_drop_last_fifth": 0.01})
    table = pd.DataFrame(rows)
    table["chosen"] = table.groupby(["arm", "seed"])["val_acc"].transform("max") == table["val_acc"]
    s = {"seeds": [0, 1], "scale": "smoke", "lr_grid": [1e-3, 3e-3, 1e-2], "lr_default": 3e-3}
    summary = {"downstream": {"classes": list("abcd")}, "audit": {"test_in_train": 0, "val_in_train": 0,
                                                                  "classes_in_both_domains": []}}
    mf = evaluate.build_metrics(table, s, summary)
    assert mf.get("acc.topadapter").values == pytest.approx([0.3, 0.31])
    assert mf.get("chosen_lr.head").values == [3e-3, 3e-3]
    assert mf.get("tuned_interior.head").values == [1.0, 1.0] and mf.get("tuned_interior.full_ft").values == [0.0, 0.0]
    assert mf.get("chosen_lr.topadapter").values == [1e-2, 1e-2] and mf.get("tuned_interior.topadapter").values == [0.0, 0.0]
    assert mf.get("param_ratio.head").values == [1.0, 1.0]
    assert mf.get("tuning_tie.head").values == [1.0, 1.0] and mf.get("tuning_tie.full_ft").values == [0.0, 0.0]
    assert mf.get("acc_gap.topadapter_vs_full_ft").values == pytest.approx([0.0, 0.0])
    assert mf.get("acc.chance").values == [0.25, 0.25] and mf.get("trainable_share.head").values == [0.1, 0.1]
    # convergence is recorded per arm and seed at the picked rate
    assert mf.get("final_loss.full_ft").values == [0.5, 1.5] and mf.get("train_acc.topadapter").values == [0.8, 0.8]
    assert mf.get("loss_drop_last_fifth.head").values == [0.01, 0.01]


class _FakeRun:
    """Stands in for fitting.BatchedRun: no training, records the epochs asked for."""
    made = []

    def __init__(self, model, datas, total_epochs, batch, lr, rngs, **k):
        self.model, self.k, self.lr, self.total, self.asked = model, len(datas), lr, total_epochs, []
        _FakeRun.made.append(self)

    def train(self, epochs):
        self.asked.append(epochs)
        return np.zeros((epochs, self.k))


@pytest.mark.parametrize("top, picked, tie", [((0.625, 0.75), 1e-2, False), ((0.625, 0.5), 3e-3, True)])
def test_run_arm_sweeps_picks_once_per_arm_on_pooled_validation_and_carries_the_pick_on(dataset, monkeypatch,
                                                                                      top, picked, tie):
    """Every rate trains the sweep's epochs; one rate per arm is picked on the validation accuracy pooled over the
    seeds (the default wins within one standard error of the pooled accuracy); only the picked rate's runs carry on
    to the end of their schedule, and only they are scored on the test split."""
    n_val = len(dataset["downstream"]["val"]["labels"])
    val = {1e-3: [0.25, 0.25], 3e-3: [0.5, 0.5], 1e-2: list(top)}
    _FakeRun.made = []
    monkeypatch.setattr(train, "BatchedRun", _FakeRun)
    calls = []

    def fake_acc(model, datas, **k):  # the sweep's validation per rate, then val / test / train of the pick
        calls.append(model)
        i = len(calls) - 1
        if i < 3:
            return val[[1e-3, 3e-3, 1e-2][i]]
        return [0.9 + 0.01 * (i - 3)] * 2
    monkeypatch.setattr(train, "accuracy_batched", fake_acc)
    states = {sd: train.new_backbone(S).state_dict() for sd in (0, 1)}
    out = train.run_arm("head", {0: dataset["downstream"], 1: dataset["downstream"]}, states,
                        {**S, "seeds": [0, 1], "lr_grid": [1e-3, 3e-3, 1e-2], "lr_default": 3e-3, "epochs": 10,
                         "sweep_epochs": 3})["seeds"]
    pooled = max(sum(v) / 2 for v in val.values())
    for sd in ("0", "1"):
        assert out[sd]["chosen_lr"] == picked and out[sd]["tie"] == tie
        assert out[sd]["at_grid_edge"] == (picked == 1e-2)
        assert out[sd]["selection_se"] == pytest.approx(math.sqrt(pooled * (1 - pooled) / (2 * n_val)))
        assert out[sd]["test_acc"] == pytest.approx(0.91)  # val, then test, then train of the picked runs
        assert [g["test_acc"] is not None for g in out[sd]["grid"]] == [lr == picked for lr in (1e-3, 3e-3, 1e-2)]
    assert [r.asked for r in _FakeRun.made] == [[3] if r.lr != picked else [3, 7] for r in _FakeRun.made]
    assert all(r.total == 10 for r in _FakeRun.made)  # every rate's schedule is the full run's
    assert calls[3] is [r for r in _FakeRun.made if r.lr == picked][0].model


def test_sweep_then_carry_on_is_one_uninterrupted_run(dataset):
    """The sweep's runs carried on (optimiser, cosine schedule and generators continue) equal one run of all the
    epochs: the pick is made on the first epochs of the same runs that are reported."""
    S2 = {**S, "seeds": [0, 1]}
    down = dataset["downstream"]
    train.add_simplex_tables(down, S["scales"])
    states = _states([0, 1])
    outs = []
    for split in ([3], [1, 2]):
        batch, _ = train.build_seed_batch("topadapter", states, S2, 8, [0, 1])
        run = fitting.BatchedRun(batch, [down["train"]] * 2, 3, S["batch"], 1e-2,
                                 train.train_rngs([0, 1], "topadapter", 1e-2), topo=True)
        outs.append((np.concatenate([run.train(e) for e in split]), [p.detach().clone() for p in batch.stacked]))
    assert np.array_equal(outs[0][0], outs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(outs[0][1], outs[1][1]))


def _states(seeds, s=S):
    out = {}
    for sd in seeds:
        torch.manual_seed(100 + sd)
        out[sd] = train.new_backbone(s).state_dict()
    return out


@pytest.mark.parametrize("arm", ["topadapter", "lora", "point_peft", "full_ft"])
def test_a_seed_trained_in_the_seed_batch_is_the_seed_trained_alone(dataset, arm):
    """SeedBatch (issue #42): each seed's own backbone, initialisation, batch order, rotations and AdamW steps. The
    batched seed (simplex features from the precomputed, rotated table) equals the seed trained alone with the
    plain loop (features recomputed from the rotated points) to float tolerance; seeds stay distinct; the frozen
    backbone stays frozen in the batch."""
    seeds, lr, epochs = [0, 1], 1e-2, 3
    down = dataset["downstream"]
    train.add_simplex_tables(down, S["scales"])
    states = _states(seeds)
    batch, _ = train.build_seed_batch(arm, states, S, 8, seeds)
    fitting.fit_batched(batch, [down["train"]] * 2, epochs, S["batch"], lr, train.train_rngs(seeds, arm, lr),
                        topo=arm in train.TOPADAPTER_ARMS)
    batched = batch.state_dicts()
    for i, sd in enumerate(seeds):
        alone = train.build_alone(arm, states[sd], S, 8, sd)
        fitting.fit(alone, down["train"], epochs, S["batch"], lr, train.train_rngs([sd], arm, lr)[0])
        moved = 0
        for name, w in alone.state_dict().items():
            # full FT: Adam's normalised step turns rounding in near-zero gradients (e.g. the patch MLP's biases)
            # into differences of up to one step (lr) per element; measured 1e-3 here and 2.9e-3 under CI's
            # thread settings after 6 steps of lr 1e-2. The adapter arms agree to 2e-5; accuracy is checked below
            torch.testing.assert_close(batched[sd][name], w, atol=lr if arm == "full_ft" else 2e-5, rtol=1e-4)
            moved += not torch.equal(w, train.build_alone(arm, states[sd], S, 8, sd).state_dict()[name])
        assert moved > 0
        acc_alone = fitting.accuracy(alone, down["test"])
        acc_batched = fitting.accuracy_batched(batch, [down["test"]] * 2, topo=arm in train.TOPADAPTER_ARMS)[i]
        assert acc_batched == pytest.approx(acc_alone, abs=1.01 / len(down["test"]["labels"]))  # at most one flip
    if arm != "full_ft":
        kept = [torch.equal(batched[sd]["backbone." + k], v) for sd in seeds for k, v in states[sd].items()
                if ("backbone." + k) in batched[sd]]
        assert len(kept) > 10 and all(kept)  # frozen weights unchanged
    assert not torch.allclose(batched[0]["head.weight"], batched[1]["head.weight"])


def test_simplex_table_follows_the_rotation(dataset):
    """The table computed once and rotated equals the features recomputed from the rotated patches, and TopAdapter
    gives the same output from either."""
    d = dataset["downstream"]["train"]
    rel, cen = d["rel"][:6], d["centers"][:6]
    R = fitting.z_rotations(torch.linspace(0.3, 5.0, 6))
    rel_r = torch.einsum("bgkj,bij->bgki", rel, R)
    table = geometry.rotate_table_z(geometry.simplex_table(rel, S["scales"]), R)
    assert torch.allclose(table, geometry.simplex_table(rel_r, S["scales"]), atol=1e-4)
    for variant in ("topadapter", "single_scale", "no_2d"):
        m = train.build(variant, None, S, 8).eval()
        with torch.no_grad():
            for p in m.adapter.inject:
                p.weight.normal_(std=0.3)
            cen_r = torch.einsum("bgj,bij->bgi", cen, R)
            assert torch.allclose(m(rel_r, cen_r), m(rel_r, cen_r, table), atol=1e-4)


def test_budgets_are_matched_and_counted_on_the_built_modules():
    """The trainable counts come from the built models: LoRA's is rank x (in + out) of each adapted linear layer
    plus the head; TopAdapter's is its adapter's parameters plus the head; with match_params every PEFT
    baseline lands within 10% of TopAdapter, without it (the configured widths) they need not."""
    head = 2 * S["d"] * 8 + 8
    ta = train.build("topadapter", None, S, 8)
    assert train.trainable_of("topadapter", S, 8) == sum(p.numel() for p in ta.adapter.parameters()) + head
    bb = train.new_backbone(S)
    linears = [m for n, m in bb.named_modules() if isinstance(m, torch.nn.Linear) and n.split(".")[-1] in ("qkv", "proj", "fc1", "fc2")]
    for r in (1, 3):
        assert train.trainable_of("lora", S, 8, r) == r * sum(m.in_features + m.out_features for m in linears) + head
    import yaml
    from pathlib import Path
    block = yaml.safe_load((Path(__file__).parents[1] / "config" / "config.yaml").read_text())["topadapter"]
    for scale in ("smoke", "default"):  # the configured scales: every baseline within 10% of TopAdapter's budget
        s = block[scale]
        widths = train.matched_widths(s, 8)
        target = train.trainable_of("topadapter", s, 8)
        for arm, w in widths.items():
            count = train.trainable_of(arm, s, 8, w)
            assert 0.9 <= count / target <= 1.1, (scale, arm, w, count / target)
            for other in (w - 1, w + 1):  # the nearest width was picked
                if other >= 1:
                    assert abs(train.trainable_of(arm, s, 8, other) - target) >= abs(count - target)
    target = train.trainable_of("topadapter", S, 8)
    unmatched = train.matched_widths({**S, "match_params": False}, 8)
    assert unmatched == {"lora": S["lora_rank"], "idpt": S["adapter_dim"], "dapt": S["adapter_dim"], "point_peft": S["adapter_dim"]}
    assert train.trainable_of("idpt", S, 8, unmatched["idpt"]) / target < 0.9  # the old, unequal budget


def _judge(values: dict, seeds=(0, 1, 2, 3, 4)):
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.metrics import MetricsFile
    mf = MetricsFile("topadapter", "default", replicate="seed", replicates=list(seeds))
    for name, v in values.items():
        mf.add(name, list(v), unit="x", direction="higher")
    pc = load_claims("topadapter")
    gates = V.judge_gates(pc, mf)
    return {g: r.state for g, r in gates.items()}, {r.claim.id: r.verdict for r in V.judge_paper(pc, mf, gates)}


def _planted(**over):
    base = {"acc.chance": [0.125] * 5, "acc.head": [0.6, 0.62, 0.58, 0.61, 0.6], "acc.head_random": [0.3] * 5,
            **{f"acc.{a}": [0.6, 0.61, 0.59, 0.6, 0.62] for a in train.ARMS if a not in ("head", "head_random")},
            "acc.topadapter": [0.7, 0.72, 0.69, 0.71, 0.7],
            **{f"param_ratio.{a}": [1.02] * 5 for a in train.WIDTH_ARMS},
            "acc_gap.topadapter_vs_full_ft": [0.1] * 5}
    return {**base, **over}


def test_beats_peft_needs_matched_budgets():
    """A clear win reads reproduced at matched budgets; with LoRA at 0.64 x TopAdapter's budget (the first
    version's ratio) the gate fails and the claim is not testable, whatever the accuracies."""
    gates, verdicts = _judge(_planted())
    assert gates["budgets_matched"] == "holds" and verdicts["beats_peft"] == "reproduced"
    gates, verdicts = _judge(_planted(**{"param_ratio.lora": [0.64] * 5}))
    assert gates["budgets_matched"] == "fails" and verdicts["beats_peft"] == "not testable at this scale"


def test_topology_claim_does_not_reproduce_when_the_noise_control_matches():
    """Planted: TopAdapter no better than its noise control (the topology carries nothing) -> not reproduced or
    inconclusive, never reproduced."""
    _, verdicts = _judge(_planted(**{"acc.noise_topology": [0.71, 0.73, 0.70, 0.72, 0.71]}))
    assert verdicts["topology_injection_helps"] in ("not reproduced", "inconclusive")


def test_topology_claim_is_controlled_by_the_noise_arm():
    """(That every controlled condition must beat its control is checked for every paper in
    test_claims_registry.) The topology claim's control is the noise arm: same shapes and parameters,
    no topology."""
    topo = next(c for c in load_claims("topadapter").claims if c.id == "topology_injection_helps")
    assert "acc.noise_topology" in topo.controls


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper, planted_gate, planted_verdict  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "topadapter", ("accuracy_vs_trainable_params.png", "ablations.png"),
                                is_timing=lambda n: n.startswith("train_seconds"))
    assert metrics.get("test_clouds_in_train").values == [0.0] * len(metrics.replicates)
    assert metrics.get("classes_in_both_domains").values == [0.0] * len(metrics.replicates)
    assert metrics.get("trainable_params.noise_topology").values == metrics.get("trainable_params.topadapter").values
    assert metrics.get("trainable_params.head").values[0] < metrics.get("trainable_params.full_ft").values[0]


def test_topology_claim_fails_against_a_budget_matched_adapter_that_wins_without_topology():
    """Beating the noise-fed adapter (noise can hurt) is not enough: Point-PEFT at the same budget, the closest
    adapter without topological input, must lose too."""
    from icmlrepro.core import verdicts as V

    def planted(point_peft):
        return planted_verdict("topadapter", "topology_injection_helps", {
            "acc.topadapter": 0.72, "acc.noise_topology": 0.62, "acc.head": 0.55, "acc.point_peft": point_peft},
            step=0.003)

    assert planted(0.68) == V.REPRODUCED
    assert planted(0.78) == V.NOT_REPRODUCED


def test_full_ft_gate_fails_when_the_frozen_backbone_is_within_the_on_par_margin():
    """'Comparable to full fine-tuning' (at most 2 points below) must be a test the untouched backbone + head
    fails; where full fine-tuning adds only 1 point over it, the gate fails (checklist 16)."""
    assert planted_gate("topadapter", "full_ft_discriminates", {"acc.full_ft": 0.80, "acc.head": 0.79}) == "fails"
    assert planted_gate("topadapter", "full_ft_discriminates", {"acc.full_ft": 0.80, "acc.head": 0.70}) == "holds"
