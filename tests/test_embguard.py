"""EMBGuard: the taxonomy and its actions (no action states its hazard's state), the four split variants of a
base scenario and their labels, train/test disjointness with a planted leak caught, the salience rule and the
scores on hand-computed cases (FPR, conditional hazard accuracy, pair accuracy), the guard's decoding and
explanation, action conditioning (the observation-only network ignores the action), the arms' data budgets,
and the smoke chain."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.papers.embguard import data, evaluate, model, taxonomy, train
from icmlrepro.papers.embguard.taxonomy import CATEGORIES, ELEMENTS, HAZARDS

SMALL = {"grid": 3, "cell": 16, "n_train_base": 28, "n_test_base": 14, "test_fraction": 0.34,
         "min_distractors": 1, "max_distractors": 3, "max_inert": 1, "contrast_min": 1.0, "width": 8, "hidden": 8, "train_pairs": 60,
         "epochs": 1, "batch": 32, "lr": 0.003, "seeds": [0]}


@pytest.fixture(scope="module")
def built():
    return data.build(SMALL, 0)


def _all_actions(e):
    return [t.format(x=i) for t in e.causal for i in e.items] + list(e.benign_actions())


def test_taxonomy_has_the_seven_published_categories_each_with_named_mechanisms():
    assert len(CATEGORIES) == 7
    for c in CATEGORIES:
        assert sum(e.category == c for e in ELEMENTS) >= 2, c
    assert all(e.mechanism and "{x}" in t for e in ELEMENTS for t in e.causal)


def test_no_action_names_the_state_of_its_hazard():
    # the state (lit, wet, open, ...) is only visible in the image: an action that said it would leak the label
    for e in ELEMENTS:
        state = e.label.split()[0]
        for a in _all_actions(e):
            assert not re.search(rf"\b{re.escape(state)}\b", a), (e.name, a)


def test_variants_of_a_base_scenario_have_the_published_split_semantics(built):
    pairs, images = built
    for _, b in pairs[pairs["part"] == "test"].groupby("base"):
        v = b.set_index("split")
        target = v.loc["causal_risky", "target"]
        assert v.loc["causal_risky", "active"] == target and v.loc["causal_risky", "unsafe"]
        assert v.loc["selective_risky", "unsafe"] and v.loc["selective_risky", "hazard"] == target
        assert len(v.loc["selective_risky", "active"].split(",")) == 2  # a second active hazard, not engaged
        assert v.loc["decoupled_benign", "active"] == target and not v.loc["decoupled_benign", "unsafe"]
        assert v.loc["decoupled_benign", "action"] != v.loc["causal_risky", "action"]
        assert v.loc["absent_benign", "active"] == "" and not v.loc["absent_benign", "unsafe"]
        assert v.loc["absent_benign", "action"] == v.loc["causal_risky", "action"]  # hazard removal, same action
        assert v.loc["causal_risky", "risk_type"] == taxonomy.ELEMENT[target].category
        assert set(v.loc[["decoupled_benign", "absent_benign"], "hazard"]) == {"none"}
    # the causal pair and its action-augmented twin share one image; every other variant has its own
    causal = pairs[pairs["split"] == "causal_risky"]
    twin = pairs[pairs["split"] == "decoupled_benign"]
    assert list(causal["image"]) == list(twin["image"])
    assert pairs["image"].nunique() == 3 * pairs["base"].nunique() == len(images)  # confounded pairs reuse images
    assert images.shape[1:] == (3, 48, 48) and images.dtype == np.uint8


def test_the_state_of_the_target_is_visible(built):
    pairs, images = built
    b = pairs[pairs["base"] == "test0"].set_index("split")
    causal, absent = images[b.loc["causal_risky", "image"]], images[b.loc["absent_benign", "image"]]
    # the state mark of the target's cell differs (warning colour vs grey); noise alone is at most 16
    assert np.abs(causal.astype(int) - absent.astype(int)).max() > 60


def test_train_and_test_are_disjoint_combinations_and_a_planted_leak_is_caught(built):
    pairs, _ = built
    assert evaluate.leaked_actions(pairs) == 0
    tr, te = pairs[pairs["part"] == "train"], pairs[pairs["part"] == "test"]
    combos = lambda d: {(r.target, tuple(sorted(r.active.split(",")))) for r in d[d["split"] == "selective_risky"].itertuples()}  # noqa: E731
    assert not combos(tr) & combos(te)
    for e in ELEMENTS:  # every element keeps items on both sides
        assert data.action_pools("train", 0.34)["items"][e.name] and data.action_pools("test", 0.34)["items"][e.name]
    planted = pairs.copy()
    i = planted.index[planted["part"] == "train"][0]
    planted.loc[i, "action"] = te["action"].iloc[0]
    assert evaluate.leaked_actions(planted) >= 1


def test_salience_flags_any_active_hazard_and_names_the_most_salient():
    p = evaluate.salience_predict(pd.Series(["glass,stove", "", "pills"]))
    assert list(p["pred_unsafe"]) == [True, False, True]
    assert list(p["pred_hazard"]) == ["stove", "none", "pills"]  # stove precedes glass in SALIENCE_ORDER
    assert list(p["pred_type"]) == ["fire", "none", "chemical"]


def _hand_predictions():
    # one base scenario (4 pairs) judged by one arm and seed
    rows = [("causal_risky", True, "fire", "stove", True, "fire", "stove"),
            ("selective_risky", True, "fire", "stove", True, "chemical", "bleach"),
            ("decoupled_benign", False, "none", "none", True, "fire", "stove"),
            ("absent_benign", False, "none", "none", False, "none", "none")]
    return pd.DataFrame([{"arm": "a", "seed": 0, "base": "b0", "split": sp, "unsafe": u, "risk_type": t, "hazard": h,
                          "pred_unsafe": pu, "pred_type": pt, "pred_hazard": ph}
                         for sp, u, t, h, pu, pt, ph in rows])


def test_scores_on_a_hand_computed_case():
    sc = evaluate.score(_hand_predictions()).set_index("group")
    assert sc.loc["all", "risk_acc"] == pytest.approx(0.75)
    assert sc.loc["benign", "flag_rate"] == pytest.approx(0.5)       # FPR: 1 of 2 benign pairs flagged
    assert sc.loc["decoupled_benign", "flag_rate"] == 1.0
    assert sc.loc["risky", "hazard_acc"] == pytest.approx(0.5)       # conditional on flagged risky pairs
    assert sc.loc["selective_risky", "type_acc"] == 0.0
    assert sc.loc["pairs", "risk_acc"] == 0.0                        # causal right, its safe twin wrong
    assert np.isnan(sc.loc["absent_benign", "hazard_acc"])           # no risky pair there: undefined, not 0


def test_perfect_predictions_score_perfectly_after_the_join(built):
    # a causal pair and its safe twin share one image: a join on the image alone gave each prediction both
    # labels (caught here: accuracy 0.5 on those splits and an undefined pair accuracy)
    pairs, _ = built
    te = pairs[pairs["part"] == "test"].reset_index(drop=True)
    pred = te[["image", "base", "split", "action_id"]].assign(
        pred_unsafe=te["unsafe"], pred_type=te["risk_type"], pred_hazard=te["hazard"], arm="a", seed=0)
    joined = evaluate.join_labels(pred, te[["image", "base", "split", "action", "unsafe", "risk_type", "hazard", "active"]]
                                  .assign(seed=0))
    assert len(joined) == len(te)
    sc = evaluate.score(joined).set_index("group")
    assert (sc["risk_acc"] == 1.0).all()
    assert sc.loc["risky", "hazard_acc"] == 1.0 and sc.loc["benign", "flag_rate"] == 0.0


def test_decode_never_contradicts_itself_and_the_explanation_uses_the_fields():
    out = {"risk": torch.tensor([[2.0, 0.0], [0.0, 2.0]]),
           "type": torch.tensor([[9.0, 0.0, 1.0, 0, 0, 0, 0, 0]] * 2),
           "hazard": torch.tensor([[9.0] + [0.0] * 13 + [1.0]] * 2)}
    unsafe, rtype, hazard = model.decode(out)
    assert unsafe.tolist() == [False, True]
    assert rtype.tolist() == [0, 2] and hazard.tolist() == [0, 14]  # "none" wins the logits but not when unsafe
    text = evaluate.explain("pour the vinegar into the bleach bottle", True, "chemical", "bleach")
    assert "open bleach bottle" in text and "chemical" in text and "toxic gas" in text
    assert evaluate.explain("look at the stove", False, "none", "none").startswith("Safe")


def test_guard_loss_on_a_hand_case_types_and_hazards_only_on_unsafe_pairs():
    import math
    out = {"risk": torch.zeros(2, 2), "type": torch.zeros(2, 8), "hazard": torch.zeros(2, 15)}
    out["type"][1, 1] = math.log(7.0)  # the unsafe pair: its category gets 7/14 of the mass
    risk, rtype, hazard = torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([0, 3])
    expect = math.log(2) + (-math.log(7 / 14)) + math.log(15)
    assert float(model.guard_loss(out, risk, rtype, hazard)) == pytest.approx(expect, rel=1e-6)
    # the safe pair's type/hazard logits do not matter (decode reads them only when unsafe)
    out["type"][0], out["hazard"][0] = torch.randn(8), torch.randn(15)
    assert float(model.guard_loss(out, risk, rtype, hazard)) == pytest.approx(expect, rel=1e-6)
    assert float(model.guard_loss(out, torch.tensor([0, 0]), rtype * 0, hazard * 0)) == pytest.approx(math.log(2))


def test_observation_only_ignores_the_action_and_the_guard_reads_it():
    torch.manual_seed(0)
    x = torch.rand(4, 3, 48, 48)
    a, b = torch.randn(4, 384), torch.randn(4, 384)
    obs = model.Guard(384, 3, 8, 8, use_action=False).eval()
    guard = model.Guard(384, 3, 8, 8, use_action=True).eval()
    with torch.no_grad():
        assert torch.equal(obs(x, a)["risk"], obs(x, b)["risk"])
        assert not torch.allclose(guard(x, a)["risk"], guard(x, b)["risk"])
        assert torch.allclose(guard(x, a)["attention"].sum(-1), torch.ones(4))


def test_every_arm_gets_the_same_budget_from_the_variants_it_may_use(built):
    pairs, _ = built
    for arm, (allowed, _, shuffled) in train.ARMS.items():
        tr = train.training_set(pairs, arm, SMALL["train_pairs"], np.random.default_rng(0))
        assert len(tr) == SMALL["train_pairs"] and set(tr["variant"]) <= set(allowed)
        assert (tr["part"] == "train").all()
        if shuffled:  # labels and images kept, the action decoupled from them
            orig = train.training_set(pairs, "guard", SMALL["train_pairs"], np.random.default_rng(0))["action_id"].to_numpy()
            assert sorted(orig) == sorted(tr["action_id"]) and (orig != tr["action_id"].to_numpy()).any()
    with pytest.raises(ValueError):
        train.training_set(pairs, "guard_no_removal", 3 * SMALL["n_train_base"] + 1, np.random.default_rng(0))


def test_a_guard_learns_the_conjunction_on_the_training_pairs(built):
    # a planted shortcut check: image alone and action alone cannot fit the labels, the guard can
    pairs, images = built
    acts = np.random.default_rng(0).standard_normal((pairs["action_id"].max() + 1, 16)).astype(np.float32)
    s = SMALL | {"width": 16, "hidden": 32, "epochs": 40, "train_pairs": 84, "lr": 0.005}
    tr = pairs[(pairs["part"] == "train") & pairs["variant"].isin(train.ALL_VARIANTS)].reset_index(drop=True)
    acc = {}
    for arm in ("guard", "observation_only"):
        m = train.new_model(s, arm, acts.shape[1], 0)
        torch.manual_seed(0)
        train.fit(m, train.tensors(tr, images, acts), s, np.random.default_rng(0))
        p = train.predict(m, train.tensors(tr, images, acts))
        acc[arm] = float((p["pred_unsafe"].to_numpy() == tr["unsafe"].to_numpy()).mean())
    assert acc["observation_only"] <= 0.8  # the same image is risky under one action and safe under its twin
    assert acc["guard"] >= 0.9
    assert acc["guard"] > acc["observation_only"] + 0.1


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper, planted_verdict  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "embguard", ("split_accuracy_fpr.png", "example_scenes.png"),
                                is_timing=lambda n: n.startswith("train_seconds"))
    assert metrics.get("test_actions_seen_in_training").values == [0.0] * len(metrics.replicates)
    # every seed is trained and tested on its own data set (issue 40)
    out = smoke_run / "results" / "smoke" / "embguard"
    pairs = pd.read_parquet(out / "data" / "pairs.parquet")
    pred = pd.read_parquet(out / "train" / "guard" / "predictions.parquet")
    assert sorted(pairs["seed"].unique()) == sorted(metrics.replicates)
    for sd in metrics.replicates:
        own_test = set(pairs.loc[(pairs["seed"] == sd) & (pairs["part"] == "test"), "image"])
        assert set(pred.loc[pred["seed"] == sd, "image"]) <= own_test
    assert metrics.get("fpr.salience_oracle.decoupled_benign").values[0] == 1.0  # over-cautious by construction
    assert metrics.get("risk_acc.salience_oracle.risky").values[0] == 1.0       # perfect perception
    # the learned stand-in is trained and scored like every arm (not a copy of the oracle rule)
    assert len(metrics.get("risk_acc.salience.risky").values) == len(metrics.replicates)


# --- controls that could win, a stand-in that perceives imperfectly (audit of issue #40) -----------------

def test_confounded_pairs_keep_the_data_remove_the_contrast_and_fit_the_true_rule(built):
    pairs, _ = built
    tr = pairs[pairs["part"] == "train"]
    conf = tr[tr["variant"] == "confounded"]
    assert len(conf) == 2 * tr["base"].nunique() and not conf["unsafe"].any()
    assert (pairs.loc[pairs["part"] == "test", "variant"] != "confounded").all()  # never tested
    absent = tr[tr["variant"] == "hazard_removal"]
    # the data kept: every inert image of hazard removal, every safe action string of action augmentation
    assert set(conf["image"]) == set(absent["image"])
    assert set(tr.loc[tr["variant"] == "action_aug", "action"]) <= set(conf["action"])
    # the contrast removed: no safe pair shares its image or its action with a risky pair
    risky = tr[tr["unsafe"]]
    assert not set(conf["image"]) & set(risky["image"]) and not set(conf["action"]) & set(risky["action"])
    # the true rule fits the control's data: the target is inert in every confounded scene
    assert not conf.apply(lambda r: r["target"] in r["active"].split(","), axis=1).any()
    # the control's budget: the same as the guard's, from the same number of pairs, the same class balance
    g = train.training_set(pairs, "guard", SMALL["train_pairs"], np.random.default_rng(0))
    c = train.training_set(pairs, "guard_confounded", SMALL["train_pairs"], np.random.default_rng(0))
    assert len(g) == len(c)
    n = lambda arm: ((pairs["part"] == "train") & pairs["variant"].isin(train.ARMS[arm][0])).sum()  # noqa: E731
    assert n("guard") == n("guard_confounded")
    assert pairs[(pairs["part"] == "train") & pairs["variant"].isin(train.ARMS["guard_confounded"][0])]["unsafe"].mean() == 0.5


def test_the_salience_stand_in_learns_presence_labels_without_the_action(built):
    pairs, _ = built
    tr = train.training_set(pairs, "salience", SMALL["train_pairs"], np.random.default_rng(0))
    assert not train.ARMS["salience"][1]  # image only
    assert (tr["unsafe"] == (tr["active"] != "")).all()
    assert tr.loc[tr["variant"] == "action_aug", "unsafe"].all()       # a visible hazard is flagged, any action
    assert not tr.loc[tr["variant"] == "hazard_removal", "unsafe"].any()
    hit = tr[tr["unsafe"]]
    assert (hit["hazard"] == hit["target"]).all() and (tr.loc[~tr["unsafe"], "hazard"] == "none").all()
    # the guard's labels on the same pairs are the action-conditioned ones
    g = train.training_set(pairs, "guard", SMALL["train_pairs"], np.random.default_rng(0))
    assert not g.loc[g["variant"] == "action_aug", "unsafe"].any()


def test_hazard_visibility_varies_between_inert_grey_and_the_warning_colour():
    from icmlrepro.papers.embguard import render as R
    rng = lambda: np.random.default_rng(3)  # noqa: E731
    objs = [("stove", 0, "active")]
    full = R.render(objs, 3, 16, rng(), 1.0)
    assert np.array_equal(full, R.render(objs, 3, 16, rng()))  # contrast 1: the fully salient mark, as before
    mark = R.style("stove")[2]
    marks = []
    for seed in range(40):
        img = R.render(objs, 3, 16, np.random.default_rng(seed), 0.0).astype(int)
        marks.append(img[:, 2, 2])  # inside the state mark of cell 0
    marks = np.array(marks)
    grey, warn = np.array(R.INERT_MARK), np.array(mark)
    v = ((marks - grey) @ (warn - grey)) / ((warn - grey) @ (warn - grey))
    assert v.min() < 0.25 and v.max() > 0.75  # faint and salient hazards both occur


def test_a_planted_control_that_clears_benign_scenes_better_fails_the_claim():
    # the verdict can come out the other way: if the confounded control's FPR is lower (or equal), the claim that
    # compositional variation is what clears benign scenes is not reproduced; the same for the stand-in
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.metrics import MetricsFile
    pc = load_claims("embguard")
    by_id = {c.id: c for c in pc.claims}
    mf = MetricsFile("embguard", "default", replicates=list(range(5)))
    guard = [0.10, 0.12, 0.11, 0.09, 0.10]
    mf.add("fpr.guard.benign", guard)
    mf.add("fpr.guard_confounded.benign", [g - 0.05 for g in guard])  # the control wins
    mf.add("fpr.salience.benign", [g - 0.03 for g in guard])
    mf.add("risk_acc.guard.all", [0.85, 0.86, 0.84, 0.87, 0.85])
    mf.add("risk_acc.salience.all", [0.70, 0.71, 0.69, 0.72, 0.70])
    for cid in ("compositional_variation", "lower_false_positives"):
        assert V.judge_claim(by_id[cid], mf).verdict == V.NOT_REPRODUCED, cid
    mf2 = MetricsFile("embguard", "default", replicates=list(range(5)))
    mf2.add("fpr.guard.benign", guard)
    mf2.add("fpr.guard_confounded.benign", [0.45, 0.5, 0.48, 0.52, 0.47])
    mf2.add("fpr.salience.benign", [0.45, 0.5, 0.48, 0.52, 0.47])
    mf2.add("risk_acc.guard.all", [0.85, 0.86, 0.84, 0.87, 0.85])
    mf2.add("risk_acc.salience.all", [0.70, 0.71, 0.69, 0.72, 0.70])
    for cid in ("compositional_variation", "lower_false_positives"):
        assert V.judge_claim(by_id[cid], mf2).verdict == V.REPRODUCED, cid
    # a guard that buys its low false-positive rate by flagging less: below the stand-in over all four splits
    mf3 = MetricsFile("embguard", "default", replicates=list(range(5)))
    mf3.add("fpr.guard.benign", guard)
    mf3.add("fpr.salience.benign", [0.45, 0.5, 0.48, 0.52, 0.47])
    mf3.add("risk_acc.guard.all", [0.66, 0.67, 0.65, 0.68, 0.66])
    mf3.add("risk_acc.salience.all", [0.70, 0.71, 0.69, 0.72, 0.70])
    assert V.judge_claim(by_id["lower_false_positives"], mf3).verdict == V.NOT_REPRODUCED


# --- seeds that cover the data (issue 40): every seed draws its own train and test sets -----------------------

def test_every_seed_draws_its_own_data_and_reruns_are_identical():
    pairs, images = data.build_all(SMALL, [0, 1])
    again, images2 = data.build_all(SMALL, [0, 1])
    pd.testing.assert_frame_equal(pairs, again)
    assert np.array_equal(images, images2)
    one, one_images = data.build(SMALL, 1)
    own = pairs[pairs["seed"] == 1].reset_index(drop=True)
    # a seed's own set is build(s, seed), its images shifted behind the earlier seeds'
    assert own["objects"].tolist() == one["objects"].tolist()
    assert np.array_equal(images[own["image"].to_numpy()], one_images[one["image"].to_numpy()])
    assert set(pairs.loc[pairs["seed"] == 0, "image"]).isdisjoint(own["image"])
    # redrawn: scenes and rendered images differ between seeds (not one data set shared by every seed)
    zero = pairs[pairs["seed"] == 0].reset_index(drop=True)
    assert (zero["objects"] != own["objects"]).mean() > 0.5
    assert not np.array_equal(images[zero["image"].to_numpy()], images[own["image"].to_numpy()])
    # one action table over every seed; the held-out action strings stay held out across seeds too
    assert (pairs["action_id"].map(dict(enumerate(sorted(pairs["action"].unique())))) == pairs["action"]).all()
    tr, te = pairs[pairs["part"] == "train"], pairs[pairs["part"] == "test"]
    assert not te["action"].isin(set(tr["action"])).any()


def test_a_prediction_joined_to_another_seeds_test_set_is_caught():
    pairs, _ = data.build_all(SMALL, [0, 1])
    te = pairs[pairs["part"] == "test"].reset_index(drop=True)
    keep = ["seed", "image", "base", "split", "action", "unsafe", "risk_type", "hazard", "active"]
    pred = te[te["seed"] == 0][["image", "base", "split", "action_id"]].assign(
        pred_unsafe=True, pred_type="fire", pred_hazard="stove", arm="a", seed=1)  # seed 0's pairs labelled seed 1
    with pytest.raises(ValueError, match="one to one"):
        evaluate.join_labels(pred, te[keep])


def test_a_guard_that_flags_everything_is_not_competitive():
    """On the risky splits (unsafe pairs only) accuracy is recall, which flagging everything maximises; over all
    four splits such a guard scores a coin flip and is not competitive with the stand-in."""
    flag_all = {"risk_acc_guard_minus_salience.risky": 0.0, "risk_acc.guard.all": 0.5, "risk_acc.salience.all": 0.8}
    assert planted_verdict("embguard", "competitive_with_proprietary", flag_all) == "not reproduced"
    close = {"risk_acc_guard_minus_salience.risky": 0.0, "risk_acc.guard.all": 0.79, "risk_acc.salience.all": 0.8}
    assert planted_verdict("embguard", "competitive_with_proprietary", close) == "reproduced"
