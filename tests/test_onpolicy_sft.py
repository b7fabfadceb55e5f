"""On-Policy SFT: phi on a hand case and its zero mean under the model, the SFT/DFT/IDFT/DPO/SimPO losses
against their formulas (TRL's for DPO and SimPO), Hinted Decoding's mixing weight, the restyling (same
answer, other trace), disjoint problem splits with a planted leak caught, the phi -> generalization link,
and the smoke chain."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.lm.tasks import Task, check, generate
from icmlrepro.papers.onpolicy_sft import data, ddt, evaluate, hinted, losses, styles

from .conftest import ROOT, check_smoke_paper


def _case():
    """Two positions; the first position's logits [0, ln 3] (p = [1/4, 3/4]) predict the second label, 1."""
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0]]])
    labels = torch.tensor([[-100, 1]])
    return logits, labels


def test_phi_on_a_hand_case_and_zero_mean_under_the_model():
    logits, labels = _case()
    phi, mask = ddt.token_phi(logits, labels)
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert mask.tolist() == [[True]]
    assert float(phi[0, 0]) == pytest.approx(math.log(0.75) + h, rel=1e-6)
    # E_{y ~ p}[log p(y) + H(p)] = 0: a token drawn from the model is in distribution on average
    g = torch.Generator().manual_seed(0)
    lg = torch.randn(1, 2, 7, generator=g)
    p = torch.softmax(lg[0, 0], -1)
    expect = sum(float(p[y]) * float(ddt.token_phi(lg, torch.tensor([[-100, y]]))[0][0, 0]) for y in range(7))
    assert expect == pytest.approx(0.0, abs=1e-6)


def test_token_losses_match_their_formulas():
    logits, labels = _case()
    p = 0.75
    assert float(losses.sft_loss(logits, labels)) == pytest.approx(-math.log(p), rel=1e-6)
    assert float(losses.dft_loss(logits, labels)) == pytest.approx(-p * math.log(p), rel=1e-6)
    phi = math.log(p) - (0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    gamma = min(max(math.exp(-phi / 1.0), 0.1), 2.0)
    assert float(losses.idft_loss(logits, labels, 1.0, 0.1, 2.0)) == pytest.approx(-(p ** gamma) * math.log(p), rel=1e-6)
    # ramp 0: gamma = 1 (the published warm-up), i.e. -p log p
    assert float(losses.idft_loss(logits, labels, 1.0, 0.1, 2.0, ramp=0.0)) == pytest.approx(-p * math.log(p), rel=1e-6)


def test_dft_and_idft_stop_the_gradient_through_their_weights():
    """DFT: d/dz[-sg(p) log p] = -p dlogp/dz; IDFT (paper; published trainer since eb0f3e7): d/dz[-sg(p^gamma) log p]
    = -p^gamma dlogp/dz, never of the other sign (the initial commit differentiated p^gamma, which pushes a target
    token with p < exp(-1/gamma) down)."""
    z = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0]]], requires_grad=True)
    labels = torch.tensor([[-100, 1]])
    losses.dft_loss(z, labels).backward()
    p = torch.tensor([0.25, 0.75])
    dlogp = torch.tensor([0.0, 1.0]) - p  # d log p_1 / d z
    assert torch.allclose(z.grad[0, 0], -0.75 * dlogp, atol=1e-6)
    z.grad = None
    losses.idft_loss(z, labels, 1.0, 0.1, 2.0, ramp=0.0).backward()  # gamma = 1: the same gradient as DFT
    assert torch.allclose(z.grad[0, 0], -0.75 * dlogp, atol=1e-6)
    # an unlikely target token (p = 0.1 < 1/e) is pulled up, with weight p^gamma, gamma at its cap
    z2 = torch.tensor([[[math.log(9.0), 0.0], [0.0, 0.0]]], requires_grad=True)
    losses.idft_loss(z2, labels, 1.0, 0.1, 2.0).backward()
    assert float(z2.grad[0, 0, 1]) == pytest.approx(-(0.1 ** 2.0) * 0.9, rel=1e-5)


def test_idft_down_weights_out_of_distribution_tokens():
    """A token the model finds unlikely (phi << 0) gets gamma at its cap and a smaller weight p^gamma than DFT's p."""
    logp_all = torch.log_softmax(torch.tensor([[5.0, 0.0, 0.0]]), -1)
    rare, common = logp_all[:, 1], logp_all[:, 0]
    g_rare = losses.idft_gamma(rare, logp_all, 1.0, 0.1, 2.0)
    g_common = losses.idft_gamma(common, logp_all, 1.0, 0.1, 2.0)
    assert float(g_rare) == 2.0 and float(g_common) < 1.0
    assert float(rare.exp() ** g_rare) < float(rare.exp())
    assert losses.idft_ramp(0, 100, 0.2, 0.1) == 0.0 and losses.idft_ramp(25, 100, 0.2, 0.1) == pytest.approx(0.5)
    assert losses.idft_ramp(31, 100, 0.2, 0.1) == 1.0


def test_dpo_and_simpo_follow_trls_formulas():
    pi_w, pi_l = torch.tensor([-3.0, -1.0]), torch.tensor([-2.0, -4.0])
    ref_w, ref_l = torch.tensor([-3.5, -1.0]), torch.tensor([-2.0, -3.0])
    beta = 0.1
    # TRL DPOTrainer (sigmoid): logits = (pi_w - pi_l) - (ref_w - ref_l); loss = -logsigmoid(beta * logits)
    trl = [-math.log(1 / (1 + math.exp(-beta * ((a - b) - (c - d))))) for a, b, c, d in zip(pi_w, pi_l, ref_w, ref_l)]
    assert float(losses.dpo_loss(pi_w, pi_l, ref_w, ref_l, beta)) == pytest.approx(np.mean(trl), rel=1e-6)
    # TRL CPOTrainer (simpo): logits = (avg_w - avg_l) - gamma / beta; loss = -logsigmoid(beta * logits)
    b, g = 2.0, 1.0
    trl = [-math.log(1 / (1 + math.exp(-b * ((w - l) - g / b)))) for w, l in zip(pi_w, pi_l)]
    assert float(losses.simpo_loss(pi_w, pi_l, b, g)) == pytest.approx(np.mean(trl), rel=1e-6)
    logits, labels = _case()
    assert float(losses.sequence_logprob(logits, labels)[0]) == pytest.approx(math.log(0.75), rel=1e-6)


def test_hinted_decoding_mixing_weight():
    v = 8
    uniform = torch.full((1, v), -math.log(v))
    sure = torch.log_softmax(torch.tensor([[30.0] + [0.0] * (v - 1)]), -1)
    assert float(hinted.mixing_weight(uniform, 0.5)) == pytest.approx(0.5)  # H / log V = 1
    assert float(hinted.mixing_weight(uniform, 3.0)) == 1.0  # clamped
    assert float(hinted.mixing_weight(sure, 1.0)) < 1e-6
    assert float(hinted.mixing_weight(uniform, 0.0)) == 0.0  # beta = 0: the hinted stream alone
    a, b = torch.log_softmax(torch.randn(2, v), -1), torch.log_softmax(torch.randn(2, v), -1)
    assert torch.allclose(hinted.mix(a, b, torch.tensor([0.0, 1.0])), torch.stack([a[0], b[1]]))


def test_restyle_keeps_the_answer_and_changes_the_trace():
    t = Task("sort", 3, "sort 3 1 2 ?", "1 | 3 2 ; 2 | 3 ; 3 |", "1 2 3")
    r = styles.restyle(t)
    assert r.trace == "3 2 | 1 then 3 | 2 then | 3" and r.answer == t.answer and r.prompt == t.prompt
    assert check(t, styles.solution(r))  # accuracy is style-blind
    assert styles.hint_prompt(t, r) == "sort 3 1 2 hint 3 2 | 1 then 3 | 2 then | 3 # 1 2 3 ?"
    rng = np.random.default_rng(0)
    for fam in ("add", "mod", "sort"):
        for task in generate(fam, 20, (2, 6), rng):
            re = styles.restyle(task)
            assert re.answer == task.answer and re.trace != task.trace and " then " in f" {re.trace} " or task.difficulty < 2
    with pytest.raises(ValueError):
        styles.restyle(Task("dyck", 2, "dyck ( ) ?", "( 1 ; ) 0", "yes"))


def test_joiner_style_keeps_the_steps_and_changes_only_the_joiner():
    t = Task("sort", 3, "sort 3 1 2 ?", "1 | 3 2 ; 2 | 3 ; 3 |", "1 2 3")
    r = styles.restyle(t, "joiner")
    assert r.trace == "1 | 3 2 then 2 | 3 then 3 |" and r.answer == t.answer and check(t, styles.solution(r))
    assert r.trace.replace(" then ", " ; ") == t.trace  # the steps are the model's own
    with pytest.raises(ValueError):
        styles.restyle(t, "other")
    p = {**SMALL, "target": {**SMALL["target"], "style": "joiner"},
         "pretrain": {**SMALL["pretrain"], "target_steps_range": [2, 6]}}
    pre = data.pretrain_table(p)
    plain = pre[(pre["family"] == "sort") & (pre["prompt"] == pre["question"])]
    assert plain["difficulty"].max() > SMALL["pretrain"]["steps_range"][1]  # the target family's own range
    assert pre.loc[pre["family"] != "sort", "difficulty"].max() <= SMALL["pretrain"]["steps_range"][1]
    target = data.target_table(p, set(pre["question"]))
    assert all(" then " in x and " | " in x and ";" not in x for x in target["styled_trace"])


SMALL = {"seeds": [0, 1], "target_family": "sort", "ood_families": ["dyck"],
         "pretrain": {"n_per_family": 40, "steps_range": [2, 4], "n_hint": 40, "hint_steps_range": [2, 6]},
         "target": {"n_train": 10, "n_val": 5, "n_test": 5, "steps_range": [5, 6]},
         "ood": {"n_per_family": 10, "steps_range": [2, 10]}}


def test_splits_are_disjoint_and_unseen_and_a_planted_leak_is_caught():
    pre = data.pretrain_table(SMALL)
    target = data.target_table(SMALL, set(pre["question"]))
    for seed, g in target.groupby("seed"):
        by = {s: set(g.loc[g["split"] == s, "prompt"]) for s in ("train", "val", "test")}
        assert not (by["train"] & by["val"]) and not (by["train"] & by["test"]) and not (by["val"] & by["test"])
    assert not set(target["prompt"]) & set(pre["question"])
    assert (pre["prompt"].str.contains(" hint ") == (pre["prompt"] != pre["question"])).all()
    # plant a leak: a test problem in the pretraining questions is removed from the pool
    leaked = target.loc[target["split"] == "test", "prompt"].iloc[0]
    again = data.target_table(SMALL, set(pre["question"]) | {leaked})
    assert leaked not in set(again["prompt"])
    ood = data.ood_table(SMALL, set(pre["question"]))
    assert set(ood["family"]) == {"dyck"} and not set(ood["prompt"]) & set(pre["question"])


def test_phi_link_is_the_rank_correlation_and_its_permutation_null_covers_every_pairing():
    phi = {"ground_truth": -6.0, "ground_truth_matched": -5.0, "self": 0.0, "hinted": -0.5, "hinted_beta0": -1.0}
    ood = {"sft": 0.1, "gt_matched_sft": 0.2, "self_sft": 0.9, "hint_sft": 0.8, "hint0_sft": 0.7}
    assert evaluate.link(phi, ood) == pytest.approx(1.0)
    null = evaluate.link_null(phi, ood)
    assert len(null) == 120  # all 5! pairings
    assert np.mean(null) == pytest.approx(0.0, abs=1e-12)  # symmetric without ties
    assert np.sum(null >= 1.0 - 1e-12) == 1  # only the true pairing reaches rho = 1: exact p = 1/120
    assert 0.5 < np.quantile(null, 0.95) < 1.0
    assert math.isnan(evaluate.link(phi, {k: 0.5 for k in ood}))  # constant accuracy: no ranking


def test_ood_set_is_balanced_per_seed_and_redrawn():
    p = {**SMALL, "ood_families": ["dyck", "mod"], "ood": {"n_per_family": 20, "steps_range": [2, 8]}}
    pre = data.pretrain_table(p)
    ood = data.ood_table(p, set(pre["question"]))
    for seed, g in ood.groupby("seed"):
        shares = data.answer_shares(g)
        assert shares["dyck"] == 0.5 and shares["mod"] <= 0.6, shares
        assert (g["family"].value_counts() == 20).all()
    a, b = (set(ood.loc[ood["seed"] == s, "prompt"]) for s in (0, 1))
    assert a != b  # redrawn per seed
    assert not set(ood["prompt"]) & set(pre["question"])


def test_rate_pick_breaks_ties_toward_the_default_and_records_its_standard_error():
    from icmlrepro.papers.onpolicy_sft.train import pick

    scored = [(0.3, 1e-4, "a"), (0.5, 1e-3, "b"), (0.5, 1e-2, "c")]
    assert pick(scored, 1e-2)[2] == "c" and pick(scored, 1e-3)[2] == "b" and pick(scored, 3e-3)[2] == "b"
    hits = {1e-4: [1, 0, 0, 0], 1e-3: [1, 1, 0, 1], 1e-2: [0, 1, 1, 0]}
    g = pd.DataFrame([{"arm": "sft", "lr": lr, "val_acc": float(np.mean(h)), "val_hits": h, "chosen": lr == 1e-3}
                      for lr, h in hits.items()])
    sel = evaluate.selection(g)
    diff = np.array([1, 0, -1, 1])  # chosen (1e-3) minus the runner-up (1e-2)
    assert sel["margin"] == pytest.approx(0.25) and sel["tie"] == 0.0
    assert sel["se"] == pytest.approx(diff.std(ddof=1) / 2)


def test_arm_cost_adds_its_corpus_generation_to_its_training():
    grid = pd.DataFrame([{"arm": "dpo", "lr": 1e-3, "val_acc": 0.2, "seconds": 5.0},
                         {"arm": "dpo", "lr": 1e-4, "val_acc": 0.4, "seconds": 7.0},
                         {"arm": "sft", "lr": 1e-3, "val_acc": 0.3, "seconds": 2.0}])
    gen = {"sampling": 10.0, "hinted": 20.0, "hinted_beta0": 15.0}
    assert evaluate.arm_seconds("dpo", grid, gen) == 17.0  # chosen rate's training + sampling
    assert evaluate.arm_seconds("sft", grid, gen) == 2.0


def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "onpolicy_sft", ("ood_vs_in_domain.png", "phi_per_corpus.png",
                                                            "cost_per_arm.png"),
                                is_timing=lambda n: n.startswith(("seconds.", "train_time_ratio")))
    for arm in ("base", "sft", "hint_idft", "dpo", "simpo"):
        assert all(0.0 <= v <= 1.0 for v in metrics.get(f"ood_acc.{arm}").values if np.isfinite(v))


def test_claims_text_states_the_default_config():
    """The claims file's assumptions state the hinted-decoding temperature and beta, the update budget and the
    validation size of the default config (the audit found 'temperature 1.0' in the text, 0.3 in the config)."""
    import re

    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.io import parse_yaml

    cfg = parse_yaml((ROOT / "config" / "config.yaml").read_text(), "config/config.yaml")["onpolicy_sft"]["default"]
    text = " ".join(load_claims("onpolicy_sft").assumptions)
    temp = re.search(r"temperature ([0-9.]+) \(config corpora\.hint_temperature", text)
    beta = re.search(r"beta = ([0-9.]+) here \(a choice, config corpora\.hint_beta", text)
    budget = re.search(r"every arm takes (\d+) AdamW updates of (\d+) examples", text)
    val = re.search(r"validation accuracy \((\d+) problems\)", text)
    assert temp and beta and budget and val, "the assumptions no longer state these settings"
    assert float(temp.group(1)) == cfg["corpora"]["hint_temperature"]
    assert float(beta.group(1)) == cfg["corpora"]["hint_beta"]
    assert (int(budget.group(1)), int(budget.group(2))) == (cfg["finetune"]["steps"], cfg["finetune"]["batch_size"])
    assert int(val.group(1)) == cfg["target"]["n_val"]
    assert f"{cfg['n_seeds']} seeds" in load_claims("onpolicy_sft").scale_gap


def _gate_states(rows: list[dict]) -> dict:
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.metrics import MetricsFile

    evaluate.fold_base_gaps(rows)
    seeds = list(range(len(rows)))
    mf = MetricsFile("onpolicy_sft", "default", replicate="seed", replicates=seeds)
    for name in rows[0]:
        mf.add(name, [r[name] for r in rows])
    return {g: r.state for g, r in V.judge_gates(load_claims("onpolicy_sft"), mf).items()}


def _planted(seed: int, base_ood: float = 0.8, dpo_ood: float = 0.5, majority: float = 0.2,
             pref_gain: float = 0.05, pref_test_gain: float | None = None) -> dict:
    test_gain = pref_gain if pref_test_gain is None else pref_test_gain
    j = 0.01 * (seed % 3)
    healthy = {f"id_acc.{a}": 0.5 + j for a in ("sft", "dft", "idft", "self_sft", "gt_matched_sft", "hint_sft",
                                               "hint0_sft", "hint_idft", "dpo", "simpo")}
    return {**healthy, "id_acc.base": 0.3, "ood_acc.sft": 0.6 + j, "correct_fraction.hinted": 0.6 + j,
            "ood_majority_share": majority, "ood_acc.majority": 0.13, "ood_acc.base": base_ood + j,
            "ood_acc.dpo": dpo_ood - j, "ood_acc.simpo": dpo_ood + j,
            "ood_acc_base_minus_dpo": base_ood - dpo_ood + 2 * j, "ood_acc_base_minus_simpo": base_ood - dpo_ood,
            "pref_stage_val_gain.dpo": pref_gain + j, "pref_stage_val_gain.simpo": pref_gain - j,
            "pref_stage_test_gain.dpo": test_gain - j, "pref_stage_test_gain.simpo": test_gain + j}


def test_preference_stage_gate_fails_when_the_stage_adds_nothing_to_its_sft_model():
    """Two-stage DPO / SimPO whose preference stage leaves the SFT-on-chosen model where it was are that SFT model:
    the on-par claim must not be judged against them."""
    assert _gate_states([_planted(s) for s in range(5)])["preference_stage_learns"] == "holds"
    assert _gate_states([_planted(s, pref_gain=0.0) for s in range(5)])["preference_stage_learns"] != "holds"
    # a gain on the validation set the rate was picked on, none on the test set: selection, not learning
    assert _gate_states([_planted(s, pref_test_gain=0.0) for s in range(5)])["preference_stage_learns"] != "holds"


def test_on_par_gate_fails_when_the_untrained_base_is_on_par_and_holds_when_it_is_not():
    far = _gate_states([_planted(s) for s in range(5)])
    assert set(far.values()) == {"holds"}, far
    below = _gate_states([_planted(s, base_ood=0.5, dpo_ood=0.8) for s in range(5)])  # DPO above the base
    assert below["on_par_discriminates"] == "holds"
    near = _gate_states([_planted(s, base_ood=0.62, dpo_ood=0.6) for s in range(5)])  # base within 5 points
    assert near["on_par_discriminates"] != "holds"


def test_balance_gate_fails_on_a_mostly_one_answer_set():
    """The audit's dyck set: 71 of 80 items answered 'no'."""
    assert _gate_states([_planted(s, majority=71 / 80) for s in range(5)])["ood_balanced"] == "fails"
    shares = data.answer_shares(pd.DataFrame({"family": ["dyck"] * 80, "answer": ["no"] * 71 + ["yes"] * 9}))
    assert shares["dyck"] == pytest.approx(0.8875)


def test_band_gate_reads_the_base_model_and_fails_at_the_ceiling_or_the_floor():
    """ood_band: the base model must sit inside the out-of-domain scale (room for forgetting and for gains); SFT
    collapsing out of domain (the paper's claimed direction) is an outcome the gate lets through."""
    rows = [_planted(s) for s in range(5)]
    for r in rows:
        r["ood_acc.sft"] = 0.0
    assert _gate_states(rows)["ood_band"] == "holds"
    assert _gate_states([_planted(s, base_ood=0.99) for s in range(5)])["ood_band"] == "fails"  # at the ceiling
    assert _gate_states([_planted(s, base_ood=0.15) for s in range(5)])["ood_band"] == "fails"  # at the majority


def test_learning_gates_fail_on_a_planted_arm_that_did_not_learn():
    """Every '<arm> learns' gate fails when that arm sits at (or below) the base model in domain."""
    gates = {"sft": "sft_beats_base_in_domain", "self_sft": "on_policy_arms_learn",
             "gt_matched_sft": "on_policy_arms_learn", "hint_sft": "hinted_sft_arms_learn",
             "hint0_sft": "hinted_sft_arms_learn", "idft": "idft_learns", "dft": "dft_learns",
             "hint_idft": "framework_learns", "dpo": "offline_rl_learns", "simpo": "offline_rl_learns"}
    for arm, gate in gates.items():
        rows = [_planted(s) for s in range(5)]
        for r in rows:
            r[f"id_acc.{arm}"] = r["id_acc.base"] - 0.05
        states = _gate_states(rows)
        assert states[gate] == "fails", (arm, states)
        assert all(v == "holds" for g, v in states.items() if g not in (gate,)), (arm, states)
    rows = [_planted(s) for s in range(5)]
    for r in rows:
        r["correct_fraction.hinted"] = r["id_acc.base"]  # the hint is ignored
    assert _gate_states(rows)["hinted_corpus_uses_hint"] != "holds"


def test_default_ood_set_spans_pretraining_difficulty_and_beyond_as_the_claims_state():
    """The out-of-domain lengths (config ood.steps_range) cover the pretraining range of mod/add and go beyond it
    (at 2-5 steps alone the base sat at the ood_band ceiling, 0.965); the assumptions state the configured range."""
    import re

    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.io import parse_yaml

    cfg = parse_yaml((ROOT / "config" / "config.yaml").read_text(), "config/config.yaml")["onpolicy_sft"]["default"]
    lo, hi = cfg["ood"]["steps_range"]
    pre_lo, pre_hi = cfg["pretrain"]["steps_range"]
    assert lo <= pre_lo and pre_lo <= pre_hi < hi
    text = " ".join(load_claims("onpolicy_sft").assumptions)
    stated = re.search(r"Out-of-domain: `mod` and `add` with (\d+)-(\d+) steps \(config ood\.steps_range\)", text)
    assert stated and (int(stated.group(1)), int(stated.group(2))) == (lo, hi)
    assert f"with {lo}-{hi} steps" in load_claims("onpolicy_sft").scale_gap


def test_ood_accuracy_splits_at_the_pretraining_length_and_interior_picks_are_flagged():
    """ood_acc_within/beyond_pretraining split the out-of-domain items at the pretraining length (mean over
    families, as ood_acc); tuned_interior is 1 only for a pick strictly inside the arm's grid."""
    rows = []
    for fam, diff, correct in [("mod", 3, 1), ("mod", 6, 0), ("add", 2, 1), ("add", 4, 0), ("add", 7, 1)]:
        rows.append({"arm": "base", "split": "ood", "family": fam, "difficulty": diff, "correct": bool(correct)})
    rows.append({"arm": "base", "split": "test", "family": "sort", "difficulty": 6, "correct": True})
    preds = pd.DataFrame(rows)
    grid = pd.DataFrame([{"arm": "sft", "lr": lr, "val_acc": acc, "seconds": 1.0, "chosen": ch,
                          "val_hits": [1, 0], "moved_by_tie": False}
                         for lr, acc, ch in [(1e-4, 0.2, False), (1e-3, 0.5, True), (1e-2, 0.4, False)]])
    corpus = pd.DataFrame([{"corpus": c, "phi": -1.0, "correct": True, "lam": 0.5} for c in
                           ("ground_truth", "ground_truth_matched", "self", "hinted", "hinted_beta0")])
    costs = {"n_pairs": 0, "generation_seconds": {}}
    row = evaluate.per_seed(preds, grid, corpus, costs, ["sft"], None, pretrain_max_steps=5)
    assert row["ood_acc_within_pretraining.base"] == pytest.approx((1.0 + 0.5) / 2)
    assert row["ood_acc_beyond_pretraining.base"] == pytest.approx((0.0 + 1.0) / 2)
    assert row["ood_acc.base"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert row["tuned_interior.sft"] == 1.0 and row["lr_at_grid_edge.sft"] == 0.0
    grid["chosen"] = [False, False, True]
    assert evaluate.per_seed(preds, grid, corpus, costs, ["sft"], None, 5)["tuned_interior.sft"] == 0.0


def test_tokenizer_reads_the_pretraining_corpus_only_and_catches_an_unknown_word():
    """The base model's vocabulary (ids by frequency) must not depend on the seeds or the out-of-domain set (it did:
    a sixth seed re-ordered the ids and pretrained another base), and every evaluated text must be covered."""
    small = {**SMALL, "ood_families": ["mod", "add"], "ood": {"n_per_family": 10, "steps_range": [2, 4]}}
    pre = data.pretrain_table(small)
    ids = []
    for seeds, ood_steps in (([0, 1], [2, 4]), ([0, 1, 2], [2, 8])):
        p = {**small, "seeds": seeds, "ood": {"n_per_family": 10, "steps_range": ood_steps}}
        target = data.target_table(p, set(pre["question"]))
        ood = data.ood_table(p, set(pre["question"]))
        ids.append(data.build_tokenizer(pre, target, ood).get_vocab())
    assert ids[0] == ids[1]
    target = data.target_table(small, set(pre["question"]))
    ood = data.ood_table(small, set(pre["question"]))
    bad = ood.copy()
    bad.loc[bad.index[0], "prompt"] = bad.loc[bad.index[0], "prompt"] + " zebra"
    with pytest.raises(ValueError, match="pretraining corpus lacks"):
        data.build_tokenizer(pre, target, bad)


def test_written_joiner_share_writes_the_target_joiner_at_that_rate_in_the_target_family_only():
    """pretrain.written_joiner_share: each step boundary of a pretraining target-family trace is written as the
    target style's joiner with that probability; share 0 (default) writes none; the other families never."""
    p = {**SMALL, "pretrain": {**SMALL["pretrain"], "n_per_family": 400, "steps_range": [4, 6]}}
    none = data.pretrain_table(p)
    assert not none["trace"].str.contains(f" {styles.THEN} ").any()
    some = data.pretrain_table({**p, "pretrain": {**p["pretrain"], "written_joiner_share": 0.2}})
    native = some[(some["family"] == "sort") & (some["prompt"] == some["question"])]
    joins = native["trace"].str.count(f" {styles.THEN} ").sum()
    share = joins / (joins + native["trace"].str.count(" ; ").sum())
    assert 0.15 < share < 0.25
    assert not some.loc[some["family"] != "sort", "trace"].str.contains(f" {styles.THEN} ").any()
    # the same problems, only the joiner differs
    assert (native["trace"].str.replace(f" {styles.THEN} ", " ; ").tolist()
            == none.loc[native.index, "trace"].tolist())


def test_hinted_keep_correct_trains_on_right_answers_only_and_phi_reads_the_trained_rows():
    """corpora.hinted_keep correct: a hinted re-generation with a wrong answer stays in the corpus (correct_fraction
    and the realignment metrics read it) but is not trained on, and phi / size of the corpus read the trained rows."""
    from icmlrepro.papers.onpolicy_sft.finetune import training_rows

    rows = [{"corpus": c, "phi": ph, "correct": ok, "lam": 0.5, "train": not (c.startswith("hinted") and not ok)}
            for c in ("ground_truth", "ground_truth_matched", "self", "hinted", "hinted_beta0")
            for ph, ok in ((-0.1, True), (-3.0, False))]
    corpus = pd.DataFrame(rows)
    assert len(training_rows(corpus, "hinted")) == 1 and len(training_rows(corpus, "ground_truth")) == 2
    assert len(training_rows(corpus.drop(columns="train"), "hinted")) == 2
    preds = pd.DataFrame([{"arm": "base", "split": "test", "family": "sort", "difficulty": 6, "correct": True}])
    grid = pd.DataFrame([{"arm": "sft", "lr": 1e-3, "val_acc": 0.5, "seconds": 1.0, "chosen": True,
                          "val_hits": [1, 0], "moved_by_tie": False}])
    row = evaluate.per_seed(preds, grid, corpus, {"n_pairs": 0, "generation_seconds": {}}, ["sft"])
    assert row["phi.hinted"] == pytest.approx(-0.1) and row["size.hinted"] == 1
    assert row["correct_fraction.hinted"] == pytest.approx(0.5)
    assert row["phi.ground_truth"] == pytest.approx(-1.55) and row["size.ground_truth"] == 2
    # the realignment claim reads every re-generation, not the rows kept for training
    assert row["phi_generated.hinted"] == pytest.approx(-1.55)
    assert row["abs_phi_original_minus_hinted"] == pytest.approx(0.0)


def test_two_stage_preference_arms_start_from_and_refer_to_the_sft_on_chosen_model(monkeypatch):
    """DPO / SimPO run their papers' recipe: SFT on the chosen completions for ``pref_sft.steps`` of the arm's
    updates, then the preference loss for the rest from that model, with DPO's frozen reference = the SFT model's
    log-probs (not the base's); the stage is trained once per seed and shared by both arms and every rate."""
    import copy

    from icmlrepro.lm.model import build_model
    from icmlrepro.lm.tokenizer import train_tokenizer
    from icmlrepro.papers.onpolicy_sft import finetune as F

    pairs = pd.DataFrame({"prompt": ["sort 3 1 2 ?", "sort 2 9 4 ?", "sort 5 7 6 ?"],
                          "chosen": ["1 2 3 # 1 2 3", "2 4 9 # 2 4 9", "5 6 7 # 5 6 7"],
                          "rejected": ["1 3 2 # 1 3 2", "9 4 2 # 9 4 2", "7 6 5 # 7 6 5"]})
    tok = train_tokenizer([f"{p} {c} {r}" for p, c, r in zip(pairs["prompt"], pairs["chosen"], pairs["rejected"])])
    size = {"hidden": 16, "intermediate": 32, "layers": 1, "heads": 2, "kv_heads": 1, "max_positions": 64}
    base = build_model(len(tok), size, tok, seed=0)
    s = {"finetune": {"steps": 6, "batch_size": 3, "pref_sft": {"steps": 4, "lr": 0.05}},
         "dpo": {"beta": 0.1}, "simpo": {"beta": 2.0, "gamma": 1.0}}
    seen = []
    real_dpo = losses.dpo_loss
    monkeypatch.setattr(losses, "dpo_loss", lambda pw, pl, rw, rl, b: seen.append((rw.clone(), rl.clone()))
                        or real_dpo(pw, pl, rw, rl, b))
    trained = []
    real_loop = F._train_loop
    monkeypatch.setattr(F, "_train_loop", lambda model, n, steps, *a: trained.append(steps)
                        or real_loop(model, n, steps, *a))
    base_before = copy.deepcopy(base.state_dict())
    cache: dict = {}
    F.finetune(base, tok, "dpo", None, pairs, 1e-3, 1, s, cache, stage_seed=7)
    assert trained == [4, 2]  # the SFT stage, then the preference stage: the arm's 6 updates in all
    (stage, secs, stage_pairs, source), = cache.values()
    assert source == "base" and len(stage_pairs) == 3  # no pref_sft.pairs: the preference stage's pairs are given
    assert secs > 0 and all(torch.equal(v, base_before[k]) for k, v in base.state_dict().items())
    data = [(F.encode(tok, p, w), F.encode(tok, p, r)) for p, w, r in zip(pairs["prompt"], pairs["chosen"],
                                                                          pairs["rejected"])]
    ref_w, ref_l = F.reference_logps(stage, tok, data)
    base_w, base_l = F.reference_logps(base, tok, data)
    assert not torch.allclose(ref_w, base_w, atol=1e-3)  # the SFT stage moved the chosen log-probs
    assert float(ref_w.mean() - base_w.mean()) > 0  # ... up: it learned the chosen completions
    # every batch holds all 3 pairs (a permutation): DPO's reference log-probs are the SFT model's, not the base's
    for got_w, got_l in seen:
        assert torch.allclose(torch.sort(got_w).values, torch.sort(ref_w).values, atol=1e-5)
        assert torch.allclose(torch.sort(got_l).values, torch.sort(ref_l).values, atol=1e-5)
        assert not torch.allclose(torch.sort(got_w).values, torch.sort(base_w).values, atol=1e-3)
    # SimPO (and a second DPO rate) reuse the same SFT stage: no second stage-1 training
    trained.clear()
    F.finetune(base, tok, "simpo", None, pairs, 3e-3, 2, s, cache, stage_seed=7)
    assert trained == [2] and len(cache) == 1


def test_preference_stage_pairs_are_resampled_from_the_sft_model(monkeypatch):
    """pref_sft.pairs: sft: the preference stage trains on pairs sampled from the SFT-stage model (pi_ref, DPO's
    recipe), own first correct vs own first wrong sample, not on the base model's pairs; the re-sampling is part
    of the stage (once per seed, its seconds counted) and a seed without a re-sampled pair falls back to the given."""
    from icmlrepro.lm.model import build_model
    from icmlrepro.lm.tokenizer import train_tokenizer
    from icmlrepro.papers.onpolicy_sft import finetune as F

    pairs = pd.DataFrame({"prompt": ["sort 3 1 2 ?", "sort 2 9 4 ?"], "chosen": ["1 2 3 # 1 2 3", "2 4 9 # 2 4 9"],
                          "rejected": ["1 3 2 # 1 3 2", "9 4 2 # 9 4 2"]})
    tok = train_tokenizer([f"{p} {c} {r}" for p, c, r in zip(pairs["prompt"], pairs["chosen"], pairs["rejected"])])
    size = {"hidden": 16, "intermediate": 32, "layers": 1, "heads": 2, "kv_heads": 1, "max_positions": 64}
    base = build_model(len(tok), size, tok, seed=0)
    tasks = [Task("sort", 3, "sort 3 1 2 ?", "1 | 3 2 ; 2 | 3 ; 3 |", "1 2 3"),
             Task("sort", 3, "sort 2 9 4 ?", "2 | 9 4 ; 4 | 9 ; 9 |", "2 4 9")]
    s = {"finetune": {"steps": 6, "batch_size": 2, "pref_sft": {"steps": 4, "lr": 0.05, "pairs": "sft"}},
         "corpora": {"samples_per_problem": 3, "temperature": 1.0, "max_new_tokens": 8, "gen_batch": 8},
         "dpo": {"beta": 0.1}, "simpo": {"beta": 2.0, "gamma": 1.0}}
    sampled_by = []

    def fake_sample(model, tokenizer, ts, k, c, seed):
        sampled_by.append({n: v.clone() for n, v in model.state_dict().items()})
        return [["3 2 1 # 1 2 3", "2 1 3 # 3 2 1", "2 3 1 # 1 2 3"], ["9 # 2 4 9", "4 # 2 4 9", "2 # 2 4 9"]]

    monkeypatch.setattr(F, "sample", fake_sample)
    seen = []
    real_pf = F.pair_finetune
    monkeypatch.setattr(F, "pair_finetune", lambda model, tokenizer, triples, *a, **k: seen.append(list(triples))
                        or real_pf(model, tokenizer, triples, *a, **k))
    cache: dict = {}
    F.finetune(base, tok, "dpo", None, pairs, 1e-3, 1, s, cache, stage_seed=7, tasks=tasks)
    (stage, _, stage_pairs, source), = cache.values()
    # sampled from the SFT-stage model, not the base
    assert len(sampled_by) == 1 and all(torch.equal(v, stage.state_dict()[n]) for n, v in sampled_by[0].items())
    assert not all(torch.equal(v, base.state_dict()[n]) for n, v in sampled_by[0].items())
    # the second problem has no wrong sample: one pair, own first correct vs own first wrong
    assert source == "sft" and stage_pairs == [("sort 3 1 2 ?", "3 2 1 # 1 2 3", "2 1 3 # 3 2 1")] and seen == [stage_pairs]
    F.finetune(base, tok, "simpo", None, pairs, 1e-3, 2, s, cache, stage_seed=7, tasks=tasks)
    assert len(sampled_by) == 1 and seen[-1] == stage_pairs  # SimPO reuses the stage and its pairs
    # no re-sampled pair (every sample right): the given pairs
    monkeypatch.setattr(F, "sample", lambda model, tokenizer, ts, k, c, seed: [["1 # 1 2 3"], ["9 # 2 4 9"]])
    cache = {}
    F.finetune(base, tok, "dpo", None, pairs, 1e-3, 1, s, cache, stage_seed=7, tasks=tasks)
    (_, _, stage_pairs, source), = cache.values()
    assert source == "base" and len(stage_pairs) == 2
