"""AsyncSpade: query predictor, token selectors (oracle top-k, Quest) on hand-made cases, and sparse decoding
through the substrate's attention hook (sync and async selection), the Triton kernels under the interpreter,
and the smoke chain."""

import math

import pytest
import torch

from icmlrepro.papers.asyncspade import kernels
from icmlrepro.papers.asyncspade.predictor import cosine, predict_next, ridge_ar_coefficients
from icmlrepro.papers.asyncspade.selectors import (
    PageTable,
    indices_to_mask,
    oracle_indices,
    page_bounds,
    quest_indices,
    quest_page_scores,
    recall,
    token_scores,
    topk_indices,
)

from .conftest import check_smoke_paper, copy_workflow, non_timing, planted_gate, run_interpreted, snakemake


def test_accuracy_claims_are_judged_at_the_headline_budget():
    """The paired differences the claims judge are taken at the budget fixed in the config, not averaged over the
    sweep (a method that wins only at the largest budget cannot pass on the average); each budget's gap to the
    oracle and AsyncSpade's decode recall are reported beside."""
    import pandas as pd

    from icmlrepro.core.metrics import MetricsFile
    from icmlrepro.papers.asyncspade.evaluate import accuracy_metrics

    rows = []
    acc = {("full", 0): 0.6, ("oracle", 16): 0.6, ("oracle", 64): 0.6, ("quest", 16): 0.5, ("quest", 64): 0.5,
           ("asyncspade", 16): 0.3, ("asyncspade", 64): 0.9}
    for seed in (0, 1):
        for (method, budget), a in acc.items():
            for i in range(10):
                rows.append({"seed": seed, "method": method, "budget": budget, "correct": float(i < a * 10),
                             "decode_recall": 0.5 if budget == 16 else 0.9})
    mf = MetricsFile("asyncspade", "smoke", replicates=[0, 1])
    accuracy_metrics(mf, pd.DataFrame(rows), [0, 1], headline=16)
    m = {k: v.values for k, v in mf.metrics.items()}
    assert m["acc_asyncspade_minus_quest"] == pytest.approx([-0.2, -0.2])  # at 16, not the mean (+0.1)
    assert m["acc_asyncspade_minus_quest.mean_over_budgets"] == pytest.approx([0.1, 0.1])
    assert m["acc_gap_to_oracle.asyncspade.b16"] == pytest.approx([0.3, 0.3])
    assert m["decode_topk_recall_asyncspade.b64"] == pytest.approx([0.9, 0.9])
    with pytest.raises(ValueError, match="headline budget 32"):
        accuracy_metrics(MetricsFile("asyncspade", "smoke", replicates=[0, 1]), pd.DataFrame(rows), [0, 1], 32)


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
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 8, generator=g)
    k = torch.randn(1, 2, 5, 8, generator=g)
    s = token_scores(q, k)
    # atol: a matmul and a dot product round differently (scores near 0 failed a pure rtol check)
    assert torch.allclose(s[0, 3], k[0, 1] @ q[0, 3], atol=1e-5)
    assert torch.allclose(s[0, 0], k[0, 0] @ q[0, 0], atol=1e-5)


def test_topk_keeps_budget_with_the_newest_and_skips_padding():
    scores = torch.tensor([[[5.0, 1.0, 4.0, 0.0, 3.0, -1.0]]])
    assert indices_to_mask(topk_indices(scores, 3), 6).tolist() == [[[True, False, True, False, False, True]]]
    valid = torch.tensor([[False, True, True, True, True, True]])
    keep = indices_to_mask(topk_indices(scores, 3, valid), 6)
    assert keep.tolist() == [[[False, False, True, False, True, True]]]
    idx = topk_indices(scores, 6, valid)  # budget above the valid count: one empty slot
    assert (idx == -1).sum() == 1 and indices_to_mask(idx, 6).sum() == 5


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
    idx = quest_indices(q, k, budget=16, page_size=16)  # budget of one page -> at least 3 pages
    keep = indices_to_mask(idx, 100)
    assert idx.shape == (1, 2, 48) and (keep.sum(-1) == 2 * 16 + 4).all()  # one page is the partial last one
    assert keep[..., 96:].all()
    assert quest_indices(q, k, budget=4096) is None


def test_incremental_page_table_equals_recomputed_bounds():
    keys = torch.randn(2, 2, 70, 8)
    valid = torch.ones(2, 70, dtype=torch.bool)
    valid[1, :19] = False  # left padding of the second row
    table = PageTable(16)
    for n in range(40, 71):  # decode steps: one more key each time
        got = table.bounds(keys[:, :, :n], valid[:, :n])
        ref = page_bounds(keys[:, :, :n], 16, valid[:, :n])
        assert all(torch.equal(a, b) for a, b in zip(got, ref))
    assert not table.bounds(keys[:, :, :20], valid[:, :20])[2][1, 0]  # restarted; the padded page is empty


def test_recall_of_oracle_is_one():
    q, k = torch.randn(1, 2, 8), torch.randn(1, 1, 50, 8)
    ref = oracle_indices(q, k, 10)
    assert torch.allclose(recall(ref, ref, 50), torch.ones(1, 2, dtype=torch.float64))


# --- Triton kernels under the interpreter against their torch references -------------------------
def test_kernels_match_references_under_interpreter():
    """The kernel rule's CPU branch (the same ``bench`` the rule runs), in a fresh process with
    TRITON_INTERPRET=1: the kernels ran, every check passed, timings are listed as not measured."""
    result = run_interpreted("icmlrepro.papers.asyncspade.kernel_bench")
    assert result["triton_kernels_ran"] and result["interpreted"], result
    assert len(result["checks"]) == 12 and all(c["passed"] for c in result["checks"]), result["checks"]
    assert result["timings"] and all(not t["timed"] and math.isnan(t["kernel_ms"]) for t in result["timings"])


def test_gather_attention_over_every_token_equals_dense_attention():
    q, k, v = torch.randn(2, 4, 16), torch.randn(2, 2, 33, 16), torch.randn(2, 2, 33, 16)
    idx = torch.randperm(33).expand(2, 4, 33)  # order does not matter
    dense = torch.nn.functional.scaled_dot_product_attention(
        q[:, :, None], k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))[:, :, 0]
    assert torch.allclose(kernels.gather_attention(q, k, v, idx, 16 ** -0.5), dense, atol=1e-5)


# --- decoding with the selectors plugged into the substrate's attention hook ---------------------
import numpy as np  # noqa: E402

from icmlrepro.lm import decode as D  # noqa: E402
from icmlrepro.lm import tasks  # noqa: E402
from icmlrepro.lm.model import build_model  # noqa: E402
from icmlrepro.lm.tokenizer import train_tokenizer  # noqa: E402
from icmlrepro.lm.train import train  # noqa: E402
from icmlrepro.papers.asyncspade.decoding import METHODS, SparseAttention  # noqa: E402


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
    summary = sa.overlap()
    assert summary["selections"] > 0 and 0.0 <= summary["wait_rate"] <= 1.0
    assert 0.0 < summary["mean_recall"] <= 1.0 and -1.0 <= summary["mean_cosine"] <= 1.0


def _decode(model, tok, prompts, method, budget, asynchronous=True, sa=None, **kw):
    """Selections of one decoding run (layer, cache length, indices) through a fresh SparseAttention,
    or through ``sa`` when given (state carried over from an earlier generation)."""
    opts = dict(window=8, dense_layers=1, page_size=4, min_pages=3, asynchronous=asynchronous,
                keep_selections=True, **kw)
    if sa is None:
        with SparseAttention(model, method, budget, **opts) as sa:
            D.generate(model, tok, prompts, 24)
        return sa.selections
    start = len(sa.selections)
    D.generate(model, tok, prompts, 24)
    return sa.selections[start:]


@pytest.mark.parametrize("method", ["oracle", "quest", "asyncspade", "ideal"])
def test_selected_count_never_exceeds_the_budget(lm, method):
    """budget 12 = Quest's floor of 3 pages of 4, so every method must read at most 12 tokens."""
    model, tok, prompts = lm
    sel = _decode(model, tok, prompts, method, 12)
    counts = [int((idx >= 0).sum(-1).max()) for _, _, idx in sel if idx is not None]
    assert counts and max(counts) <= 12


def test_asyncspade_has_no_dense_decode_steps(lm):
    """From the first decode step on, every sparse-layer step with more cached tokens than the budget
    reads a selection (the last query stands in until the predictor's window fills)."""
    model, tok, prompts = lm
    sel = _decode(model, tok, prompts, "asyncspade", 6)
    assert sel and all(idx is not None for _, n, idx in sel if n > 6)
    first = min(n for _, n, _ in sel)
    assert any(idx is not None for _, n, idx in sel if n == first)


def test_asynchronous_equals_synchronous_selection(lm):
    """The worker thread computes exactly what the synchronous path computes, step by step."""
    model, tok, prompts = lm
    a = _decode(model, tok, prompts, "asyncspade", 6, asynchronous=True)
    s = _decode(model, tok, prompts, "asyncspade", 6, asynchronous=False)
    assert len(a) == len(s) > 0
    for (la, na, ia), (ls, ns, is_) in zip(a, s):
        assert (la, na) == (ls, ns) and (ia is None) == (is_ is None)
        if ia is not None:
            assert torch.equal(ia.sort(-1).values, is_.sort(-1).values)


@pytest.mark.parametrize("method", ["asyncspade", "quest"])
def test_a_new_generation_starts_from_clean_state(lm, method):
    """Batch B decoded after batch A of the same shape selects exactly as batch B decoded alone: no
    query history, pending selection or page table of A survives (AsyncSpade's history did before the
    reset: with the reset disabled this test fails; Quest's page table also detects a shorter cache)."""
    model, tok, prompts = lm
    half = len(prompts) // 2
    batch_a, batch_b = prompts[:half], prompts[half: 2 * half]
    alone = _decode(model, tok, batch_b, method, 8)
    with SparseAttention(model, method, 8, window=8, dense_layers=1, page_size=4, min_pages=3,
                         keep_selections=True) as sa:
        _decode(model, tok, batch_a, method, 8, sa=sa)
        after = _decode(model, tok, batch_b, method, 8, sa=sa)
    assert len(after) == len(alone)
    for (l1, n1, i1), (l2, n2, i2) in zip(after, alone):
        assert (l1, n1) == (l2, n2) and (i1 is None) == (i2 is None), (l1, n1)
        assert i1 is None or torch.equal(i1.sort(-1).values, i2.sort(-1).values), (l1, n1)


def test_predicted_query_recalls_more_than_the_previous_query():
    """Queries that rotate and drift (what adjacent decode queries do, in miniature): the ridge AR
    prediction's top-k overlaps the true next query's top-k more than the previous query's does.
    A predictor that returned the last query (or noise) fails this."""
    g = torch.Generator().manual_seed(3)
    heads, d, n, w, k = 8, 32, 400, 16, 20
    keys = torch.randn(1, heads, n, d, generator=g)
    phase, freq = torch.rand(heads, d, generator=g) * 6, 0.05 + 0.3 * torch.rand(heads, d, generator=g)
    s = torch.arange(w + 1, dtype=torch.float32)[:, None, None]
    seq = torch.cos(freq * s + phase) + 0.02 * s                       # [W+1, heads, d]
    hist, true = seq[:w].permute(1, 0, 2)[None], seq[w][None]         # [1, heads, W, d], [1, heads, d]
    oracle = oracle_indices(true, keys, k)
    pred = recall(topk_indices(token_scores(predict_next(hist), keys), k), oracle, n).mean()
    prev = recall(topk_indices(token_scores(seq[w - 1][None], keys), k), oracle, n).mean()
    assert pred > prev + 0.1, (float(pred), float(prev))


def test_small_budget_changes_the_output(lm):
    model, tok, prompts = lm
    ref = D.generate(model, tok, prompts, 30).tokens
    with SparseAttention(model, "oracle", budget=2, dense_layers=0):
        assert D.generate(model, tok, prompts, 30).tokens != ref


def test_index_path_over_all_valid_tokens_equals_dense_decoding(lm):
    """The gather-attention path of the hook, with left-padded prompts: listing every valid token
    (padding excluded through ``valid``) decodes exactly as dense attention does."""
    model, tok, prompts = lm
    ref = D.generate(model, tok, prompts, 30).tokens

    def every_valid(layer, q, k, v, positions=None, valid=None):
        return topk_indices(torch.zeros(q.shape[0], q.shape[1], k.shape[2]), k.shape[2], valid)

    model.set_attn_implementation(D.register_selector("test_all_indices", every_valid, kernels.gather_attention))
    try:
        assert D.generate(model, tok, prompts, 30).tokens == ref
    finally:
        model.set_attn_implementation("sdpa")


# --- the smoke chain through Snakemake ------------------------------------------------------------
from pathlib import Path  # noqa: E402


AS = Path("results/smoke/asyncspade")


@pytest.mark.integration
def test_smoke_chain_outputs_verdicts_and_timing_flags(smoke_run):
    # everything measured from wall time is flagged as a timing
    check_smoke_paper(smoke_run, "asyncspade", ("tpot_vs_context.png", "accuracy_vs_budget.png", "recall_vs_window.png"),
                      lambda name: name.startswith(("tpot", "selection_wait", "predictor_time", "kernel_ms",
                                                    "kernel_torch_ms", "kernel_bandwidth_share")))


@pytest.mark.integration
def test_smoke_chain_is_deterministic_timings_aside(smoke_run, tmp_path):
    again = copy_workflow(tmp_path)
    snakemake(again, str(AS / "metrics.json"), "--cores", "2", "--config", "scale=smoke")
    assert non_timing(again / AS / "metrics.json") == non_timing(smoke_run / AS / "metrics.json")


@pytest.mark.parametrize("layout", ["slice of a buffer", "offset slice", "transposed view"])
def test_gather_reference_reads_any_cache_layout(layout):
    """The one-table row gather (preallocated caches) and plain fancy indexing agree."""
    g = torch.Generator().manual_seed(1)
    buf = torch.randn(2, 2, 40, 8, generator=g)
    keys, values = {"slice of a buffer": (buf[:, :, :30], buf[:, :, :30].flip(-1).contiguous()),
                    "offset slice": (buf[:, :, 7:37], buf[:, :, 3:33]),
                    "transposed view": (buf.transpose(2, 3).contiguous().transpose(2, 3)[:, :, :30],
                                        buf[:, :, :30])}[layout]
    q, idx = torch.randn(2, 4, 8, generator=g), torch.randint(0, 30, (2, 4, 9), generator=g)
    ref = kernels.gather_attention_reference(q, keys.contiguous(), values.contiguous(), idx, 0.3)
    assert torch.allclose(kernels.gather_attention_reference(q, keys, values, idx, 0.3), ref, atol=1e-6)


@pytest.mark.parametrize("scale,budget", [("smoke", 16), ("default", 32), ("paper", 2048)])
def test_budget_gate_fails_where_the_headline_budget_costs_no_accuracy(scale, budget):
    """If Quest at the headline budget answers as often as full attention, the budget removes nothing and
    'AsyncSpade matches' holds for any predictor: the gate of that scale fails."""
    quest = f"accuracy.quest.b{budget}"
    gate = f"budget_binds_{scale}"
    assert planted_gate("asyncspade", gate, {"accuracy.full": 0.6, quest: 0.6}, scale=scale) == "fails"
    assert planted_gate("asyncspade", gate, {"accuracy.full": 0.6, quest: 0.48}, scale=scale) == "holds"


def test_budget_gates_name_each_scales_headline_budget():
    import yaml

    from icmlrepro.core.claims import load_claims

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())["asyncspade"]
    gates = {g.id: g for g in load_claims("asyncspade").gates}
    for scale in ("smoke", "default", "paper"):
        (cond,) = gates[f"budget_binds_{scale}"].conditions
        assert cond.minus == f"accuracy.quest.b{cfg[scale]['headline_budget']}"
