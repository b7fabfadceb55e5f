"""AsyncSpade: query predictor, token selectors (oracle top-k, Quest) on hand-made cases, and sparse decoding
through the substrate's attention hook (sync and async selection)."""

import math

import pytest
import torch

from icmlrepro.papers.asyncspade.predictor import cosine, predict_next, ridge_ar_coefficients
from icmlrepro.papers.asyncspade.selectors import (
    oracle_topk,
    quest_mask,
    quest_page_scores,
    recall,
    token_scores,
    topk_mask,
)


def test_predictor_recovers_an_exact_ar2_sequence():
    """q_s = 2 cos(w) q_{s-1} - q_{s-2} (a rotation seen per channel): AR(2) predicts it exactly."""
    w, d = 0.3, 8
    phase = torch.rand(d, generator=torch.Generator().manual_seed(0)) * 6
    seq = torch.stack([torch.cos(w * s + phase) for s in range(17)])  # [17, d]
    theta = ridge_ar_coefficients(seq[:16], order=2, lam=1e-9)
    assert torch.allclose(theta, torch.tensor([2 * math.cos(w), -1.0], dtype=theta.dtype), atol=1e-5)
    assert cosine(predict_next(seq[:16], lam=1e-9), seq[16]) > 0.99999


def test_predictor_batched_shapes_and_short_windows():
    hist = torch.randn(2, 4, 16, 32)
    assert predict_next(hist).shape == (2, 4, 32)
    short = torch.randn(2, 4, 2, 32)
    assert torch.equal(predict_next(short, order=2), short[..., -1, :])
    with pytest.raises(ValueError, match="too short"):
        ridge_ar_coefficients(short, order=2)


def test_predictor_beats_last_query_on_smooth_drift():
    t = torch.arange(40, dtype=torch.float64)[:, None]
    seq = torch.sin(0.1 * t + torch.arange(16)) + 0.01 * t  # smooth drift per channel
    pred = predict_next(seq[:32, :].float())
    assert (pred.double() - seq[32]).norm() < (seq[31] - seq[32]).norm()


def test_token_scores_follow_gqa_grouping():
    q = torch.randn(1, 4, 8)
    k = torch.randn(1, 2, 5, 8)
    s = token_scores(q, k)
    assert torch.allclose(s[0, 3], k[0, 1] @ q[0, 3])
    assert torch.allclose(s[0, 0], k[0, 0] @ q[0, 0])


def test_topk_keeps_budget_plus_newest_and_everything_when_budget_covers_context():
    scores = torch.tensor([[[5.0, 1.0, 4.0, 0.0, 3.0, -1.0]]])
    keep = topk_mask(scores, 2)
    assert keep.tolist() == [[[True, False, True, False, False, True]]]
    assert topk_mask(scores, 6).all() and oracle_topk(torch.randn(1, 2, 4), torch.randn(1, 1, 3, 4), 8).all()


def test_quest_page_score_hand_computed():
    q = torch.tensor([[[1.0, -2.0]]])
    keys = torch.tensor([[[[1.0, 1.0], [3.0, -1.0], [0.0, 2.0], [-1.0, 0.0]]]])  # two pages of 2
    # page 0: M = (3, 1), m = (1, -1): max(1*3, 1*1) + max(-2*1, -2*-1) = 3 + 2 = 5
    # page 1: M = (0, 2), m = (-1, 0): max(0, -1) + max(-4, 0) = 0 + 0 = 0
    assert quest_page_scores(q, keys, page_size=2).tolist() == [[[5.0, 0.0]]]


def test_quest_page_score_bounds_every_token_score():
    q, k = torch.randn(2, 4, 16), torch.randn(2, 2, 64, 16)
    pages = quest_page_scores(q, k, 16)
    tokens = token_scores(q, k).view(2, 4, 4, 16).amax(-1)
    assert (pages >= tokens - 1e-5).all()


def test_quest_keeps_min_pages_and_the_current_page():
    q, k = torch.randn(1, 2, 8), torch.randn(1, 1, 100, 8)  # 7 pages of 16 (last partial)
    keep = quest_mask(q, k, budget=16, page_size=16)  # budget of one page -> at least 3 pages
    assert keep.shape == (1, 2, 100)
    assert (keep.sum(-1) >= 2 * 16 + 4).all()  # 3 pages, one of them the partial last page (4 tokens)
    assert keep[..., 96:].all()
    assert quest_mask(q, k, budget=4096).all()


def test_recall_of_oracle_is_one():
    q, k = torch.randn(1, 2, 8), torch.randn(1, 1, 50, 8)
    ref = oracle_topk(q, k, 10)
    assert torch.allclose(recall(ref, ref), torch.ones(1, 2, dtype=torch.float64))


# --- decoding with the selectors plugged into the substrate's attention hook ---------------------
import numpy as np  # noqa: E402

from icmlrepro.lm import decode as D  # noqa: E402
from icmlrepro.lm import tasks  # noqa: E402
from icmlrepro.lm.model import build_model  # noqa: E402
from icmlrepro.lm.tokenizer import train_tokenizer  # noqa: E402
from icmlrepro.lm.train import train  # noqa: E402
from icmlrepro.papers.asyncspade.decoding import METHODS, SparseAttention, overlap_summary  # noqa: E402


@pytest.fixture(scope="module")
def lm():
    rng = np.random.default_rng(0)
    corpus = [t for f in tasks.FAMILIES for t in tasks.generate(f, 30, (4, 10), rng)]
    tok = train_tokenizer(t.text for t in corpus)
    model = build_model(len(tok), dict(hidden=32, intermediate=64, layers=3, heads=4, kv_heads=2,
                                       max_positions=512), tok, seed=0)
    train(model, tok, corpus, steps=30, batch_size=16, lr=3e-3, seed=0)
    return model, tok, [t.prompt for t in corpus[::17]]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_budget_covering_context_equals_full_attention(lm, method, asynchronous):
    model, tok, prompts = lm
    ref = D.generate(model, tok, prompts, 40).tokens
    with SparseAttention(model, method, budget=10_000, window=8, dense_layers=1, asynchronous=asynchronous):
        out = D.generate(model, tok, prompts, 40).tokens
    assert out == ref


def test_asyncspade_selects_within_budget_and_measures(lm):
    model, tok, prompts = lm
    with SparseAttention(model, "asyncspade", budget=8, window=8, dense_layers=1, measure=True) as sa:
        D.generate(model, tok, prompts, 30)
    summary = overlap_summary(sa.stats)
    assert sa.stats["selections"] > 0 and 0.0 <= summary["wait_rate"] <= 1.0
    assert 0.0 < summary["mean_recall"] <= 1.0 and -1.0 <= summary["mean_cosine"] <= 1.0


def test_small_budget_changes_the_output(lm):
    model, tok, prompts = lm
    ref = D.generate(model, tok, prompts, 30).tokens
    with SparseAttention(model, "oracle", budget=2, dense_layers=0):
        assert D.generate(model, tok, prompts, 30).tokens != ref
