"""ML-Embed: the MRL weighting and InfoNCE on hand-computed cases, MEL's factorisation (exact at full rank,
the best rank-r' approximation below), exit and truncation shapes, the rank sampler, the language split
(no held-out language or test concept in training, no query equal to its answer), the controls."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icmlrepro.papers.mlembed import data, evaluate, losses, model
from icmlrepro.papers.mlembed.train import ARMS, training_pairs

SMALL = {"max_concepts_per_type": 20, "test_concept_fraction": 0.3, "min_names": 60, "n_languages": 8,
         "heldout_every": 4, "vocab_size": 300}


@pytest.fixture(scope="module")
def tables():
    return data.build_tables(SMALL)


def test_mrl_weights_follow_the_published_formula():
    w = losses.mrl_weights([8, 16, 32, 64], 64)
    # n = 1 for 64, 2 for 32, 3 for 16, 4 for 8; weight 1 / (n sqrt(64 / dim))
    assert w == pytest.approx({64: 1.0, 32: 1 / (2 * math.sqrt(2)), 16: 1 / 6, 8: 1 / (4 * math.sqrt(8))})
    assert losses.mrl_dims(64, 8) == [8, 16, 32, 64] and losses.mrl_dims(48, 8) == [8, 16, 32, 48]


def test_info_nce_on_a_hand_case():
    # two orthonormal queries, each with its own positive and one hard negative
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    pos = q.clone()
    neg = torch.tensor([[[0.0, 1.0]], [[-1.0, 0.0]]])
    tau = 0.5
    # query 0 logits: [1, 0 | 0] / tau; query 1: [0, 1 | 0] / tau
    expect = -math.log(math.exp(2) / (math.exp(2) + 2))
    assert float(losses.info_nce(q, pos, neg, tau)) == pytest.approx(expect, rel=1e-6)
    # the same concept in the batch is masked, not a negative: query 0's in-batch term vanishes
    both = torch.tensor([7, 7])
    masked = -math.log(math.exp(2) / (math.exp(2) + 1))
    assert float(losses.info_nce(q, pos, neg, tau, both)) == pytest.approx(masked, rel=1e-6)


def test_matryoshka_loss_is_the_weighted_sum_over_dims_and_the_mean_over_exits():
    g = torch.Generator().manual_seed(0)
    qs = [torch.randn(4, 16, generator=g) for _ in range(2)]
    ps = [torch.randn(4, 16, generator=g) for _ in range(2)]
    ns = [torch.randn(4, 2, 16, generator=g) for _ in range(2)]
    dims = [4, 8, 16]
    w = losses.mrl_weights(dims, 16)
    by_hand = np.mean([sum(w[m] * float(losses.info_nce(q[:, :m], p[:, :m], n[..., :m], 0.05)) for m in dims)
                       for q, p, n in zip(qs, ps, ns)])
    assert float(losses.matryoshka_loss(qs, ps, ns, dims, 0.05)) == pytest.approx(by_hand, rel=1e-5)
    # a wrong weighting (uniform) gives another value: the test would catch it
    uniform = np.mean([sum(float(losses.info_nce(q[:, :m], p[:, :m], n[..., :m], 0.05)) for m in dims)
                       for q, p, n in zip(qs, ps, ns)])
    assert abs(uniform - by_hand) > 1e-3


def test_mel_factorisation_equals_E_at_full_rank_and_is_the_best_low_rank_fit():
    E = torch.randn(50, 16, generator=torch.Generator().manual_seed(1))
    U, Vm = model.svd_factors(E)
    assert torch.allclose(U @ Vm, E, atol=1e-5)
    s = torch.linalg.svdvals(E)
    for r in (2, 8):
        err = torch.linalg.norm(E - U[:, :r] @ Vm[:r])
        assert float(err) == pytest.approx(float(torch.sqrt((s[r:] ** 2).sum())), rel=1e-4)  # Eckart-Young
    enc = model.Encoder(50, 16, 2, 2, 32, 8, mel=True)
    ids = torch.tensor([[3, 4, 0]])
    plain = model.Encoder(50, 16, 2, 2, 32, 8, mel=False)
    plain.tok.weight.data = (enc.U @ enc.V).detach()
    assert torch.allclose(enc.embed(ids, 16), plain.embed(ids), atol=1e-5)


def test_exits_and_truncation_shapes():
    torch.manual_seed(0)
    assert model.exit_layers(4) == [1, 2, 4] and model.exit_layers(6) == [1, 2, 4, 6] and model.exit_layers(1) == [1]
    enc = model.Encoder(40, 16, 4, 2, 32, 10, mel=True).eval()
    ids = torch.randint(1, 40, (5, 7))
    outs = enc(ids, exits=[1, 2, 4], rank=4)
    assert [tuple(o.shape) for o in outs] == [(5, 16)] * 3
    # an exit's embedding does not depend on later layers
    with torch.no_grad():
        a = enc(ids, exits=[1], rank=4)[0]
        enc.layers[1].linear1.weight.mul_(-2.0)  # (adding a constant would vanish: a pre-LN input sums to ~0)
        assert torch.allclose(enc(ids, exits=[1], rank=4)[0], a) and not torch.allclose(enc(ids, exits=[2], rank=4)[0], outs[1])
    # padding does not change the pooled embedding
    padded = torch.cat([ids, torch.zeros(5, 3, dtype=torch.long)], 1)
    with torch.no_grad():
        assert torch.allclose(enc(padded, exits=[4], rank=4)[0], enc(ids, exits=[4], rank=4)[0], atol=1e-5)
    # parameter counts shrink along rank and depth
    p = {(r, l): model.sub_model_params(40, 16, 4, 2, 32, 10, r, l) for r in (4, 16) for l in (1, 4)}
    assert p[(4, 1)] < p[(16, 1)] < p[(16, 4)] and p[(4, 1)] < p[(4, 4)]


def test_rank_sampler_is_proportional_to_rank():
    rng = np.random.default_rng(0)
    draws = np.array([losses.sample_rank([8, 16, 32, 64], rng) for _ in range(6000)])
    share = {r: float((draws == r).mean()) for r in (8, 16, 32, 64)}
    assert share == pytest.approx({8: 8 / 120, 16: 16 / 120, 32: 32 / 120, 64: 64 / 120}, abs=0.02)


def test_retrieval_ranks_on_a_hand_case():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    c = torch.tensor([[1.0, 0.1], [0.1, 1.0], [-1.0, 0.0]])
    assert evaluate.retrieval_ranks(q, c, np.array([0, 0, 2])).tolist() == [1, 2, 3]


def test_no_held_out_language_or_test_concept_in_training(tables):
    pairs, langs, concepts = tables
    held = set(langs.loc[langs["heldout"], "lang"])
    assert held and set(langs.loc[~langs["heldout"], "resource"]) == {"high", "low"}
    tr = pairs[pairs["split"] == "train"]
    assert not set(tr["lang"]) & held
    assert not set(tr["concept"]) & set(concepts.loc[concepts["test"], "concept"])
    assert evaluate.heldout_leaks(pairs) == 0
    # the tokenizer corpus holds no held-out language's text and no test concept's English name
    corpus = set(data.training_texts(pairs, concepts))
    held_only = set(pairs.loc[pairs["lang"].isin(held), "text"]) - set(tr["text"])
    assert held_only and not corpus & held_only
    assert not corpus & (set(concepts.loc[concepts["test"], "target"]) - set(concepts.loc[~concepts["test"], "target"]))
    # the audit catches a planted leak
    planted = pairs.copy()
    planted.loc[planted.index[planted["heldout"]][0], "split"] = "train"
    assert evaluate.heldout_leaks(planted) == 1
    # the high-resource-only arm sees no low-resource language
    assert set(training_pairs(pairs, ARMS["3dml_highres"][3])["resource"]) == {"high"}


def test_no_query_equals_its_answer_and_resource_groups_follow_the_counts(tables):
    pairs, langs, _ = tables
    assert not (pairs["text"].map(data._norm) == pairs["target"].map(data._norm)).any()
    high = langs.loc[langs["resource"] == "high", "n_names"]
    low = langs.loc[langs["resource"] == "low", "n_names"]
    assert high.min() >= low.max()


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "mlembed", ("recall_along_axes.png", "quality_cost_frontier.png",
                                                       "language_groups.png"),
                                is_timing=lambda n: n.startswith(("encode_ms", "train_seconds")))
    assert metrics.get("heldout_language_pairs_in_training").values == [0.0] * len(metrics.replicates)
    assert metrics.get("params@rank8.layer1").values[0] < metrics.get("params@rank32.layer2").values[0]
