"""OnlineSPEC: exact verification (kernel and reference, statistically and greedily), speculative
decoding equal to the target, teacher-forced acceptance equal to real decoding, the online arms'
defining properties, and the smoke chain."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from icmlrepro.lm import tasks
from icmlrepro.lm.model import build_model
from icmlrepro.lm.tokenizer import train_tokenizer
from icmlrepro.lm.train import train
from icmlrepro.papers.onlinespec.feedback import collect, draft_logits, evaluate_draft, greedy_rounds, soft_ce
from icmlrepro.papers.onlinespec.learners import Arm, chunk_loss
from icmlrepro.papers.onlinespec.speculative import speculative_generate, target_generate
from icmlrepro.papers.onlinespec.verify import verify_greedy, verify_reference

from .conftest import check_smoke_paper, copy_workflow, non_timing, run_interpreted, snakemake


# --- verification ---------------------------------------------------------------------------------
def test_verification_kernel_matches_reference_under_interpreter():
    results = run_interpreted("icmlrepro.papers.onlinespec.kernel_check")
    assert len(results) >= 4
    for r in results:
        assert r["kernel_used"] and r["mismatches"] == 0, r


def test_exact_verification_emits_the_target_distribution():
    """Draft a token from q, verify against p: the emitted first token is distributed as p (chi-square),
    although q is far from p."""
    n, v = 40_000, 5
    p = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
    q = torch.tensor([0.05, 0.1, 0.15, 0.2, 0.5])
    g = torch.Generator().manual_seed(0)
    drafted = torch.multinomial(q, n, replacement=True, generator=g)[:, None]
    pp = p.expand(n, 2, v)
    acc, nxt = verify_reference(pp, q.expand(n, 1, v), drafted, torch.rand(n, 1, generator=g), torch.rand(n, generator=g))
    first = torch.where(acc == 1, drafted[:, 0], nxt)
    counts = torch.bincount(first, minlength=v).numpy()
    assert chisquare(counts, p.numpy() * n).pvalue > 1e-3
    draft_only = torch.bincount(drafted[:, 0], minlength=v).numpy()  # the test can tell distributions apart
    assert chisquare(draft_only, p.numpy() * n).pvalue < 1e-6


def test_greedy_verification_hand_case():
    logits = torch.tensor([[[0.0, 5, 1], [3, 0, 1], [0, 0, 9]]])  # argmax 1, 0, 2
    assert [int(x) for x in verify_greedy(logits, torch.tensor([[1, 0]]))] == [2, 2]
    assert [int(x) for x in verify_greedy(logits, torch.tensor([[1, 2]]))] == [1, 0]
    assert [int(x) for x in verify_greedy(logits, torch.tensor([[0, 0]]))] == [0, 1]


# --- decoding with small trained models --------------------------------------------------------------
@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(0)
    corpus = [t for f in ("add", "dyck") for t in tasks.generate(f, 40, (2, 6), rng)]
    tok = train_tokenizer(t.text for t in corpus)
    target = build_model(len(tok), dict(hidden=32, intermediate=64, layers=2, heads=4, kv_heads=2,
                                        max_positions=256), tok, seed=0)
    draft = build_model(len(tok), dict(hidden=16, intermediate=32, layers=1, heads=2, kv_heads=1,
                                       max_positions=256), tok, seed=1)
    train(target, tok, corpus, steps=60, batch_size=16, lr=3e-3, seed=0)
    train(draft, tok, corpus, steps=20, batch_size=16, lr=3e-3, seed=0)
    tok.padding_side = "left"
    return target.eval(), draft.eval(), tok, [t.prompt for t in corpus[::8]]


def test_greedy_speculative_decoding_equals_target_and_teacher_forced_acceptance(models):
    target, draft, tok, prompts = models
    fb = collect(target, tok, prompts, 40, 4)
    logits = draft_logits(draft, fb, list(range(len(prompts))), tok.pad_token_id)
    for i in range(len(prompts)):
        prompt_ids = fb.ids[i][: fb.start[i]]
        ref = target_generate(target, prompt_ids, 40, tok.eos_token_id).tokens
        spec = speculative_generate(target, draft, prompt_ids, 40, 3, tok.eos_token_id)
        assert spec.tokens == ref
        out = np.asarray(fb.ids[i][fb.start[i]:])
        assert spec.accepted == greedy_rounds(logits[i].argmax(-1).numpy(), out, 3, 40)


def test_sampled_speculative_decoding_keeps_the_target_distribution(models):
    """Second token of sampled speculative decoding vs its exact target marginal (enumerated)."""
    target, draft, tok, prompts = models
    ids = tok(prompts[0])["input_ids"]
    with torch.no_grad():
        p1 = torch.softmax(target(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
        x1 = torch.arange(len(p1))
        seqs = torch.cat([torch.tensor(ids).expand(len(p1), -1), x1[:, None]], dim=1)
        p2 = torch.softmax(target(input_ids=seqs).logits[:, -1].float(), -1)
    marginal = (p1[:, None].double() * p2.double()).sum(0).numpy()
    marginal /= marginal.sum()
    g = torch.Generator().manual_seed(0)
    n = 1000
    second = [speculative_generate(target, draft, ids, 2, 2, -1, greedy=False, generator=g).tokens[1]
              for _ in range(n)]
    counts = np.bincount(second, minlength=len(marginal))
    keep = marginal * n >= 5  # chi-square needs expected counts of at least 5: pool the rest
    obs, exp = counts[keep].astype(float), marginal[keep] * n
    if (~keep).any() and marginal[~keep].sum() > 0:
        obs, exp = np.append(obs, counts[~keep].sum()), np.append(exp, marginal[~keep].sum() * n)
    assert obs.sum() == n and np.isclose(exp.sum(), n)
    assert chisquare(obs, exp).pvalue > 1e-3


# --- online arms -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def feedback(models):
    target, _, tok, prompts = models
    return collect(target, tok, prompts, 40, 4)


def _arm(name, draft, tok, steps=4):
    return Arm(name, draft, 0.05, [0.01, 0.05, 0.2], 0.9, 1.2, steps, 4, 0, tok.pad_token_id)


def _flat(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_offline_never_changes_and_learning_arms_lower_their_loss(models, feedback):
    _, draft, tok, _ = models
    off = _arm("offline", draft, tok)
    off.update(feedback)
    assert torch.equal(_flat(off.draft), _flat(draft))
    for name in ("ogd", "osd", "optimistic", "ensemble"):
        arm = _arm(name, draft, tok, steps=30)
        before = evaluate_draft(arm.draft, feedback, 3, tok.pad_token_id)["loss"]
        arm.update(feedback)
        assert evaluate_draft(arm.draft, feedback, 3, tok.pad_token_id)["loss"] < before, name


def test_optimistic_momentum_persists_across_chunks(models, feedback):
    _, draft, tok, _ = models
    arm = _arm("optimistic", draft, tok)
    arm.update(feedback)
    state = [arm.opt.state[p]["momentum_buffer"].clone() for p in arm.draft.parameters()]
    arm.update(feedback)
    assert all(not torch.equal(s, arm.opt.state[p]["momentum_buffer"]) for s, p in zip(state, arm.draft.parameters()))


def test_osd_loss_counts_rejected_positions_only(models, feedback):
    _, draft, tok, _ = models
    idx = list(range(len(feedback.ids)))
    lg = torch.cat(draft_logits(draft, feedback, idx, tok.pad_token_id))
    probs = torch.cat(feedback.target_probs)
    out = torch.cat([torch.tensor(feedback.ids[i][feedback.start[i]:]) for i in idx])
    wrong = lg.argmax(-1) != out
    assert 0 < int(wrong.sum()) < len(out)
    by_hand = soft_ce(lg[wrong], probs[wrong])
    assert torch.allclose(chunk_loss(draft, feedback, idx, tok.pad_token_id, rejected_only=True), by_hand)


def test_ensemble_is_the_softmax_weighted_average_of_its_bases(models, feedback, monkeypatch):
    _, draft, tok, _ = models
    arm = _arm("ensemble", draft, tok, steps=3)
    trained = []
    import icmlrepro.papers.onlinespec.learners as L
    real = L.sgd_steps

    def spy(model, *a, **k):
        loss = real(model, *a, **k)
        trained.append((copy.deepcopy(model), loss))
        return loss

    monkeypatch.setattr(L, "sgd_steps", spy)
    arm.update(feedback)
    losses = np.array([loss for _, loss in trained])
    w = np.exp(-losses / 1.2) / np.exp(-losses / 1.2).sum()
    assert np.allclose(arm.weights, w)
    mix = sum(wi * _flat(m) for wi, (m, _) in zip(w, trained))
    assert torch.allclose(_flat(arm.draft), mix.float(), atol=1e-6)


# --- the smoke chain ------------------------------------------------------------------------------------
OS = Path("results/smoke/onlinespec")


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    check_smoke_paper(smoke_run, "onlinespec", ("acceptance_per_chunk.png", "speedup_per_arm.png"),
                      lambda name: ("speedup" in name and not name.startswith("max_rel"))
                      or name.startswith("draft_target"))


@pytest.mark.integration
def test_smoke_chain_is_deterministic_timings_aside(smoke_run, tmp_path):
    again = copy_workflow(tmp_path)
    snakemake(again, str(OS / "metrics.json"), "--cores", "2", "--config", "scale=smoke")
    assert non_timing(again / OS / "metrics.json") == non_timing(smoke_run / OS / "metrics.json")
