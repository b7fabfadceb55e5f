"""CofactGVR: the world's laws (a unique target, the planted tint shortcut, the cue-broken split, no question
carrying its answer), the counterfactual intervention and bonus on a hand case, the random-region control,
the scores on a hand case, and the shared warm start. (The GRPO/Q-PAS loop is tested in test_rl_grpo.py; that
each controlled condition fails on its control, in test_claims_registry.py for every paper.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.papers.cofactgvr import data, evaluate, model, train

S = {"grid": 4, "n_objects": 4, "n_values": 4, "cue_rate": 0.7, "noise": 0.1}
TRAIN_S = {**S, "hidden": 16, "sft_lr": 0.003, "lr_grid": [0.001, 0.003, 0.01], "lr_default": 0.003, "n_sft": 50, "sft_steps": 3, "iterations": 3, "prompts": 4, "group_size": 4,
           "epochs": 1, "minibatches": 2, "clip_eps": 0.2, "beta": 0.04, "format_weight": 0.1, "cf_lambda": 1.0,
           "qpas_quantile": 0.5}


@pytest.fixture(scope="module")
def splits():
    return {sp: data.make_split(2000, S, sp, 0) for sp in data.SPLITS}


def test_every_scene_has_one_target_whose_cell_shows_the_answer(splits):
    K, tasks = S["n_values"], list(data.TASKS)
    for d in splits.values():
        for i in range(200):
            q_attr, a_attr = (data.ATTRS.index(a) for a in data.TASKS[tasks[d["task"][i]]])
            q_val = int(np.argmax(d["q"][i][len(data.TASKS):]))
            assert (d["attrs"][i, :, q_attr] == q_val).sum() == 1 and d["attrs"][i, 0, q_attr] == q_val
            assert d["answer"][i] == d["attrs"][i, 0, a_attr]
            cell = d["x"][i, d["target_cell"][i]]
            assert int(np.argmax(cell[a_attr * K:(a_attr + 1) * K])) == d["answer"][i]
            # the tint is background: object cells do not show it, empty cells do
            tint_block = slice(len(data.ATTRS) * K + 1, None)
            assert cell[tint_block].max() < 0.6
            empty = np.setdiff1d(np.arange(S["grid"] ** 2), d["cells"][i])
            assert (np.argmax(d["x"][i, empty][:, tint_block], 1) == d["tint"][i]).all()


def test_the_shortcut_is_planted_in_training_and_broken_in_test_broken(splits):
    hit = {sp: float((d["tint"] == d["answer"]).mean()) for sp, d in splits.items()}
    expect = S["cue_rate"] + (1 - S["cue_rate"]) / S["n_values"]
    for sp in ("train", "val", "test_id"):  # val (picks learning rates) follows the training law
        assert hit[sp] == pytest.approx(expect, abs=0.03)
    assert hit["test_broken"] == 0.0
    # splits are different scenes (fresh draws), not copies
    assert not np.allclose(splits["train"]["x"][:50], splits["test_id"]["x"][:50])
    assert not np.allclose(splits["train"]["x"][:50], splits["val"]["x"][:50])


def test_each_seed_draws_its_own_world_and_a_split_file_keeps_them_apart(tmp_path):
    from types import SimpleNamespace

    s = {**S, "seeds": [0, 1], "n_train": 60, "n_val": 40, "n_test": 30}
    out = {sp: str(tmp_path / f"{sp}.npz") for sp in data.SPLITS}

    class Out(dict):
        summary = str(tmp_path / "summary.json")

    data.run(SimpleNamespace(params=s, output=Out(out)))
    a, b = data.load_split(out["train"], 0), data.load_split(out["train"], 1)
    assert len(a["answer"]) == len(b["answer"]) == 60 and not np.allclose(a["x"], b["x"])
    for k, v in data.make_split(60, s, "train", 1).items():
        assert np.array_equal(b[k], v)
    with pytest.raises(KeyError):
        data.load_split(out["train"], 2)


def test_the_stated_shortcut_share_is_the_measured_one():
    """The scale gap's "the tint equals the answer in N% of training scenes" is read from the claims file and
    compared with the default-scale training data (two seeds' draws)."""
    import re

    import yaml

    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    gap = yaml.safe_load((root / "resources/claims/cofactgvr.yaml").read_text())["scale_gap"]
    stated = float(re.search(r"tint equals the answer in (\d+(?:\.\d+)?)% of training scenes", gap).group(1)) / 100
    s = yaml.safe_load((root / "config/config.yaml").read_text())["cofactgvr"]["default"]
    measured = np.mean([data.tint_answer_share(data.make_split(s["n_train"], s, "train", sd)) for sd in (0, 1)])
    assert stated == pytest.approx(measured, abs=0.01)


def test_no_question_carries_its_answer(splits):
    d = splits["train"]
    # the question is (task, identifying value); given it, the answer stays spread over the values
    key = d["task"] * S["n_values"] + np.argmax(d["q"][:, len(data.TASKS):], 1)
    for k in np.unique(key):
        share = np.bincount(d["answer"][key == k], minlength=S["n_values"]) / (key == k).sum()
        assert share.max() < 0.5
    assert d["q"].shape[1] == data.question_dim(S["n_values"])


def test_masking_removes_exactly_the_chosen_cell_and_none_masks_nothing():
    x = torch.randn(3, 16, 5)
    cells = torch.tensor([2, 16, 0])  # 16 = "no evidence"
    m = model.mask_cells(x, cells)
    assert (m[0, 2] == 0).all() and (m[2, 0] == 0).all() and torch.equal(m[1], x[1])
    keep = torch.ones(3, 16, dtype=torch.bool)
    keep[0, 2] = keep[2, 0] = False
    assert torch.equal(m[keep], x[keep])
    pol = model.GVRPolicy(5, 7, 4, 8)
    q = torch.zeros(3, 7)
    assert pol.evidence_logits(x, q).shape == (3, 17)
    # the evidence crop is read from the image it is given: masking the evidence cell blanks the crop, so a
    # policy's answer on (masked image, e) equals its answer on (masked image, "no evidence")
    e = torch.tensor([2, 5, 0])
    xm = model.mask_cells(x, e)
    assert torch.allclose(pol.answer_logits(xm, q, e), pol.answer_logits(xm, q, torch.full((3,), 16)))


class CropReader:
    """A stand-in policy whose answer reads only the evidence crop: logits = 10 * first K features of the crop."""

    def answer_logits(self, x, q, e):
        n = x.shape[1]
        crop = x[torch.arange(len(x)), e.clamp_max(n - 1)] * (e < n)[:, None].float()
        return 10 * crop[:, :4]


def test_counterfactual_bonus_on_a_hand_case():
    x = torch.zeros(2, 4, 4)
    x[0, 1, 2] = 1.0  # scene 0: cell 1 shows answer 2
    x[1, 3, 0] = 1.0  # scene 1: cell 3 shows answer 0
    q = torch.zeros(2, 3)
    e, y = torch.tensor([1, 3]), torch.tensor([2, 0])
    pol = CropReader()
    al = pol.answer_logits(x, q, e)
    p_fact = float(torch.softmax(torch.tensor([0.0, 0.0, 10.0, 0.0]), 0)[2])
    # masking the predicted cell leaves a zero crop: uniform answer, p_cf = 1/4
    b = train.counterfactual_bonus(pol, x, q, e, y, al, torch.tensor([1.0, 0.0]), e, lam=0.5)
    assert b.tolist() == pytest.approx([0.5 * (p_fact - 0.25), 0.0])  # no bonus for a low-quality rollout
    # masking another cell changes nothing for a crop reader: no gap (the random-region control's case)
    b_other = train.counterfactual_bonus(pol, x, q, e, y, al, torch.ones(2), torch.tensor([0, 0]), lam=0.5)
    assert b_other.tolist() == pytest.approx([0.0, 0.0])


def test_the_random_region_is_never_the_predicted_cell_and_matches_its_kind():
    rng = np.random.default_rng(0)
    occ = torch.zeros(5000, 16, dtype=torch.bool)
    occ[:, [1, 3, 7, 12]] = True  # four object cells, twelve background cells
    e = torch.tensor([3] * 2000 + [5] * 2000 + [16] * 1000)  # an object cell, a background cell, no evidence
    r = train.other_cells(e, occ, rng)
    obj, bg = r[:2000], r[2000:4000]
    assert not (obj == 3).any() and set(obj.tolist()) == {1, 7, 12}  # another object cell, each of them
    assert not (bg == 5).any() and set(bg.tolist()) == set(range(16)) - {1, 3, 5, 7, 12}
    assert min(np.bincount(bg.numpy(), minlength=16)[[0, 2, 4, 6, 8, 9, 10, 11, 13, 14, 15]]) > 120
    assert len(set(r[4000:].tolist())) == 16  # no evidence: any cell
    lone = torch.zeros(2, 4, dtype=torch.bool)
    lone[:, 2] = True  # one object only: its "other object cell" falls back to any other cell
    assert set(train.other_cells(torch.tensor([2, 2]), lone, rng).tolist()) <= {0, 1, 3}


class OtherCellReader:
    """A planted policy whose answer reads object cell ``src`` while its evidence points elsewhere: the
    claimed cause (the answer relies on the predicted evidence) is absent."""

    def __init__(self, src):
        self.src = src

    def answer_logits(self, x, q, e):
        return 10 * x[torch.arange(len(x)), self.src][:, :4]


def test_the_control_bonus_can_beat_the_method_where_the_cause_is_absent():
    """Where the answer does not come from the predicted evidence, masking the predicted cell pays nothing,
    while the random-region control (another object cell) pays whenever it hits the cell actually read: the
    control is a competitor, not rigged to lose. Where the answer does come from the evidence, it is the
    other way round."""
    n, rng = 600, np.random.default_rng(1)
    x = torch.zeros(n, 4, 4)
    x[:, 0, 2] = 1.0  # the answer (2) is shown by object cell 0 ...
    x[:, 1, 1] = 1.0  # ... the predicted evidence is object cell 1, another object cells 2 and 3
    x[:, 2, 3] = x[:, 3, 0] = 1.0
    occ = torch.zeros(n, 4, dtype=torch.bool)
    occ[:, :] = True
    q, y, e, hq = torch.zeros(n, 3), torch.full((n,), 2), torch.ones(n, dtype=torch.long), torch.ones(n)
    pol = OtherCellReader(0)
    al = pol.answer_logits(x, q, e)
    method = train.counterfactual_bonus(pol, x, q, e, y, al, hq, e, lam=1.0)
    control = train.counterfactual_bonus(pol, x, q, e, y, al, hq, train.other_cells(e, occ, rng), lam=1.0)
    assert float(method.abs().max()) == 0.0
    assert float(control.mean()) > 0.2  # about 1/3 of the rollouts hit cell 0: a gap of ~0.75 each
    # the cause present (the answer reads the predicted cell): the method's bonus is the larger
    pol = OtherCellReader(1)
    x[:, 1] = 0.0
    x[:, 1, 2] = 1.0
    al = pol.answer_logits(x, q, e)
    method = train.counterfactual_bonus(pol, x, q, e, y, al, hq, e, lam=1.0)
    control = train.counterfactual_bonus(pol, x, q, e, y, al, hq, train.other_cells(e, occ, rng), lam=1.0)
    assert float(method.mean()) > 0.7 and float(control.abs().max()) == 0.0


def test_the_shuffled_control_keeps_each_groups_bonus_and_cuts_the_rollout_link():
    rng = np.random.default_rng(0)
    bonus = torch.tensor([0.9, 0.1, 0.0, 0.5, 0.3, 0.0, 0.2, 0.0])
    hq = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    seen = set()
    for _ in range(50):
        out = train.shuffle_in_groups(bonus, hq, 4, rng)
        assert out[[2, 4, 5, 6, 7]].tolist() == pytest.approx([0.0, 0.3, 0.0, 0.2, 0.0])  # low quality and a lone one keep theirs
        assert sorted(out[:4].tolist()) == sorted(bonus[:4].tolist())  # the group's values, permuted
        assert sorted(out[4:].tolist()) == sorted(bonus[4:].tolist())
        seen.add(tuple(out[:4].tolist()))
    assert len(seen) == 6  # every order of the three high-quality values of group 0


def test_the_shuffled_control_beats_the_method_where_the_gap_is_not_evidence_reliance():
    """A planted batch where the counterfactual gap points the wrong way (cause absent: the grounded rollouts
    show no gap, the off-target ones a large one, as when an answer reads the wrong cell): the method's
    advantages favour the off-target rollouts; the shuffled control's, on average, do not, so it keeps more
    advantage on the grounded rollouts. Where the gap is evidence reliance, it is the other way round."""
    from icmlrepro.rl import grpo

    rng, G = np.random.default_rng(0), 8
    on_target = torch.tensor([1, 1, 1, 1, 0, 0, 0, 0] * 64, dtype=torch.bool)
    reward, hq = torch.ones(len(on_target)), torch.ones(len(on_target))  # all correct: only the bonus differs
    for gap_on, gap_off, method_wins in ((0.0, 0.8, False), (0.8, 0.0, True)):
        bonus = torch.where(on_target, gap_on, gap_off)
        a_method = grpo.group_advantages(reward + bonus, G)[on_target].mean()
        a_control = np.mean([float(grpo.group_advantages(reward + train.shuffle_in_groups(bonus, hq, G, rng), G)
                                   [on_target].mean()) for _ in range(20)])
        assert (float(a_method) > a_control) == method_wins
        assert abs(a_control) < 0.2  # the control is neutral about the evidence


def test_summarise_on_a_hand_case():
    pred = pd.DataFrame({"task": ["a", "a", "b", "b"], "correct": [True, True, False, True],
                         "correct_masked": [False, True, False, True], "hit": [True, False, False, True],
                         "valid": [True, True, True, False]})
    s = evaluate.summarise(pred)
    assert s["acc"] == 0.75 and s["iou"] == 0.5 and s["format"] == 0.75
    assert s["shortcut"] == 0.25 and s["mask_drop"] == 0.25 and s["acc.a"] == 1.0 and s["acc.b"] == 0.5
    log = pd.DataFrame({"iteration": range(8), "train_acc": [0, 0, 0, 0, 0, 0, 1.0, 0.5]})
    assert evaluate.late_std(log) == pytest.approx(float(np.std([1.0, 0.5], ddof=1)))


def test_every_arm_of_a_seed_starts_from_the_same_warm_start_and_references_it(splits):
    s = {**TRAIN_S}
    starts = {}
    for arm in ("grpo", "cofactgvr"):
        pol, log, start = train.train(arm, splits["train"], s, seed=3, lr=0.003)
        starts[arm] = start
        assert len(log) == s["iterations"] and set(log["steps"]) <= {0, 2}
    for k in starts["grpo"]:
        assert torch.equal(starts["grpo"][k], starts["cofactgvr"][k])
    # the same arm and seed retrained gives the same weights and log (byte-identical metrics)
    a, log_a, _ = train.train("cofactgvr", splits["train"], s, seed=3, lr=0.003)
    b, log_b, _ = train.train("cofactgvr", splits["train"], s, seed=3, lr=0.003)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    pd.testing.assert_frame_equal(log_a, log_b)
    other = train.warm_start(splits["train"], s, seed=4).state_dict()
    assert any(not torch.equal(other[k], starts["grpo"][k]) for k in other)


def test_tuning_uses_the_same_grid_picks_the_best_val_rate_breaks_ties_to_the_default_and_flags_edges(splits, monkeypatch):
    """The lr pick on a planted val score: the best rate wins; rates within one val standard error of the best
    are tied and the tie goes to the default rate (else the tied rate nearest to it), never to a grid edge by
    rule; ties are counted, edges flagged; the run kept for the first seed is the one trained at the pick."""
    s = {**TRAIN_S, "iterations": 2}
    n_val = len(splits["val"]["answer"])
    planted = {0.001: 0.4, 0.003: 0.6, 0.01: 0.6}
    monkeypatch.setattr(train, "val_accuracy", lambda policy, split: planted[policy.lr])

    def fake_timed(arm, train_split, s_, seed, lr):
        pol = train.new_policy(s_, seed)
        pol.lr = lr
        return {"policy": pol, "log": pd.DataFrame(), "start": {}, "train_seconds": 0.0}

    monkeypatch.setattr(train, "timed_train", fake_timed)
    run, rec = train.tune("grpo", splits["train"], splits["val"], s, seed=0)
    assert [r["lr"] for r in rec["grid"]] == [0.001, 0.003, 0.01] and rec["chosen_lr"] == 0.003
    assert run["policy"].lr == 0.003 and not rec["at_grid_edge"] and rec["ties"] == 1
    assert rec["val_acc_se"] == pytest.approx(np.sqrt(0.6 * 0.4 / n_val))
    planted[0.01] = 0.7  # a clear win (far beyond one standard error) at the edge: taken and flagged
    _, rec = train.tune("grpo", splits["train"], splits["val"], s, seed=0)
    assert rec["chosen_lr"] == 0.01 and rec["at_grid_edge"] and rec["ties"] == 0
    # the audit's case: the smallest rate ties with the default (a difference inside the noise): the default wins
    planted.update({0.001: 0.793, 0.003: 0.791, 0.01: 0.5})
    _, rec = train.tune("grpo", splits["train"], splits["val"], s, seed=0)
    assert rec["chosen_lr"] == 0.003 and rec["ties"] == 1 and rec["tied_rates"] == [0.001, 0.003]
    # the default not tied: the tied rate nearest to it on the log scale
    assert train.pick_rate([{"lr": 0.001, "val_acc": 0.7}, {"lr": 0.003, "val_acc": 0.5}, {"lr": 0.01, "val_acc": 0.695}],
                           n_val, 0.003)[0] == 0.001
    assert train.pick_rate([{"lr": 0.001, "val_acc": 0.7}, {"lr": 0.003, "val_acc": 0.5}, {"lr": 0.01, "val_acc": 0.695}],
                           n_val, 0.006)[0] == 0.01
    # the val score is greedy answer accuracy (a policy always answering 0 scores the share of 0 answers)
    monkeypatch.undo()
    pol = train.new_policy(s, 0)
    for p in pol.answer.parameters():
        torch.nn.init.zeros_(p)
    with torch.no_grad():
        pol.answer[-1].bias[0] = 1.0
    assert train.val_accuracy(pol, splits["val"]) == pytest.approx(float((splits["val"]["answer"] == 0).mean()))


def test_a_rate_that_diverges_stops_training_is_flagged_and_is_never_picked(splits, monkeypatch):
    """The default run's failure (grpo_cfshuf at the grid's top rate: NaN logits, the job crashed): a run whose
    parameters go non-finite stops at that iteration with ``diverged`` in its log, scores 0 on validation and
    is not picked while another rate trained."""
    s = {**TRAIN_S, "iterations": 3}
    real_update = train.grpo.update

    def poisoned(*a, **kw):  # the optimiser step at lr 0.01 blows up
        st = real_update(*a, **kw)
        opt = a[5]
        if opt.param_groups[0]["lr"] == 0.01:
            with torch.no_grad():
                next(iter(opt.param_groups[0]["params"])).fill_(float("nan"))
        return st

    monkeypatch.setattr(train.grpo, "update", poisoned)
    pol, log, _ = train.train("grpo", splits["train"], s, seed=0, lr=0.01)
    assert train.diverged(pol) and len(log) == 1 and log["diverged"].iloc[-1] == 1.0
    run, rec = train.tune("grpo", splits["train"], splits["val"], s, seed=0)
    by_lr = {r["lr"]: r for r in rec["grid"]}
    assert by_lr[0.01]["diverged"] and by_lr[0.01]["val_acc"] == 0.0
    assert rec["chosen_lr"] != 0.01 and not train.diverged(run["policy"])
    assert not any(by_lr[lr]["diverged"] for lr in (0.001, 0.003))


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "cofactgvr", ("arms.png", "training_curves.png", "evidence_examples.png"),
                                is_timing=lambda n: n.startswith("train_seconds"))
    assert metrics.get("acc.cue_only.test_broken").values == [0.0] * len(metrics.replicates)
    assert metrics.get("updates_kept_fraction.grpo").values == [1.0] * len(metrics.replicates)
    assert max(metrics.get("updates_kept_fraction.cofactgvr").values) < 1.0
    for arm in ("grpo", "cofactgvr", "grpo_cfshuf"):  # every arm tuned on the same grid
        assert metrics.get(f"lr.{arm}").values[0] in (0.0003, 0.001, 0.003, 0.01)
        assert metrics.get(f"tuning_ties.{arm}").values[0] in (0.0, 1.0, 2.0, 3.0)
        assert set(metrics.get(f"lr_at_grid_edge.{arm}").values) <= {0.0, 1.0}
