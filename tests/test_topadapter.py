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
         topo_dim=4, scales=[4, 8], lora_rank=2, seeds=[0])


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
                             "train_seconds": 1.0, "final_loss": 0.0, "chosen": None, "trainable": 10, "total": 100})
    table = pd.DataFrame(rows)
    table["chosen"] = table.groupby(["arm", "seed"])["val_acc"].transform("max") == table["val_acc"]
    s = {"seeds": [0, 1], "scale": "smoke", "lr_grid": [1e-3, 3e-3, 1e-2]}
    summary = {"downstream": {"classes": list("abcd")}, "audit": {"test_in_train": 0, "val_in_train": 0,
                                                                  "classes_in_both_domains": []}}
    mf = evaluate.build_metrics(table, s, summary)
    assert mf.get("acc.topadapter").values == pytest.approx([0.3, 0.31])
    assert mf.get("chosen_lr.head").values == [3e-3, 3e-3]
    assert mf.get("lr_at_grid_edge.head").values == [0.0, 0.0] and mf.get("lr_at_grid_edge.full_ft").values == [1.0, 1.0]
    assert mf.get("chosen_lr.topadapter").values == [1e-2, 1e-2] and mf.get("lr_at_grid_edge.topadapter").values == [1.0, 1.0]
    assert mf.get("acc_gap.topadapter_vs_full_ft").values == pytest.approx([0.0, 0.0])
    assert mf.get("acc.chance").values == [0.25, 0.25] and mf.get("trainable_share.head").values == [0.1, 0.1]


def test_run_seed_picks_the_best_validation_rate(dataset, monkeypatch):
    vals = iter([0.2, 0.5, 0.4, 0.6, 0.1, 0.9])  # (val, test) per rate, in grid order
    monkeypatch.setattr(train, "fit", lambda *a, **k: [0.0])
    monkeypatch.setattr(train, "accuracy", lambda *a, **k: next(vals))
    out = train.run_seed("head", dataset["downstream"], train.new_backbone(S).state_dict(),
                         {**S, "lr_grid": [1e-3, 3e-3, 1e-2]}, 0)
    assert out["chosen_lr"] == 3e-3 and out["test_acc"] == 0.6 and not out["at_grid_edge"]


def test_topology_claim_is_controlled_by_the_noise_arm():
    """(That every controlled condition must beat its control is checked for every paper in
    test_claims_registry.) The topology claim's control is the noise arm: same shapes and parameters,
    no topology."""
    topo = next(c for c in load_claims("topadapter").claims if c.id == "topology_injection_helps")
    assert "acc.noise_topology" in topo.controls


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "topadapter", ("accuracy_vs_trainable_params.png", "ablations.png"),
                                is_timing=lambda n: n.startswith("train_seconds"))
    assert metrics.get("test_clouds_in_train").values == [0.0] * len(metrics.replicates)
    assert metrics.get("classes_in_both_domains").values == [0.0] * len(metrics.replicates)
    assert metrics.get("trainable_params.noise_topology").values == metrics.get("trainable_params.topadapter").values
    assert metrics.get("trainable_params.head").values[0] < metrics.get("trainable_params.full_ft").values[0]
