"""The language-model substrate: tasks and their checker, tokenizer, Qwen3 save/load, KV-cache decoding,
and the decode-time attention hook."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icmlrepro.lm import decode as D
from icmlrepro.lm import tasks
from icmlrepro.lm.model import build_model, load
from icmlrepro.lm.tokenizer import train_tokenizer
from icmlrepro.lm.train import train

SIZE = dict(hidden=32, intermediate=64, layers=2, heads=4, kv_heads=2, max_positions=512)


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    return [t for f in tasks.FAMILIES for t in tasks.generate(f, 40, (2, 6), rng)]


@pytest.fixture(scope="module")
def tok(corpus):
    return train_tokenizer(t.text for t in corpus)


@pytest.fixture(scope="module")
def trained(corpus, tok):
    model = build_model(len(tok), SIZE, tok, seed=0)
    train(model, tok, corpus, steps=30, batch_size=16, lr=3e-3, seed=0)
    return model


@pytest.mark.parametrize("family", tasks.FAMILIES)
def test_answers_are_right_and_checker_rejects_wrong_ones(family):
    rng = np.random.default_rng(1)
    for t in tasks.generate(family, 30, (1, 8), rng):
        assert tasks.check(t, t.target)
        assert not tasks.check(t, t.trace)  # no answer at all
        wrong = "yes" if t.answer == "no" else ("no" if t.answer == "yes" else t.answer + " 1")
        assert not tasks.check(t, f"{t.trace} # {wrong}")


def test_answers_computed_correctly():
    rng = np.random.default_rng(2)
    t = tasks.make_add(rng, 5)
    xs = [int(x) for x in t.prompt.split()[1:-1]]
    assert t.answer == tasks.num(sum(xs))
    s = tasks.make_sort(rng, 7)
    assert s.answer.split() == sorted(s.prompt.split()[1:-1])
    m = tasks.make_mod(rng, 6, p=7)
    v, items = int(m.prompt.split()[2]), m.prompt.split()[3:-1]
    for op, x in zip(items[::2], items[1::2]):
        v = (v + int(x)) % 7 if op == "+" else (v * int(x)) % 7
    assert m.answer == str(v)


def test_trace_length_grows_to_thousands_of_tokens(tok):
    long = tasks.generate("add", 1, (400, 400), np.random.default_rng(3))[0]
    short = tasks.generate("add", 1, (4, 4), np.random.default_rng(3))[0]
    assert len(tok(long.text)["input_ids"]) > 3000 > 100 > len(tok(short.text)["input_ids"])


def test_tokenizer_round_trip(corpus, tok):
    for t in corpus:
        ids = tok(t.text)["input_ids"]
        assert ids[0] == tok.bos_token_id and tok.unk_token_id not in ids
        assert tok.decode(ids, skip_special_tokens=True) == t.text
    assert all(len(tok.tokenize(d)) == 1 for d in "0123456789")


def test_save_load_gives_equal_logits(tmp_path, trained, tok):
    trained.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model2, tok2 = load(tmp_path)
    x = tok(["add 1 2 3 ?", "sort 3 1 ?"], return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.equal(trained(**x).logits, model2(**x).logits)
    assert tok2.get_vocab() == tok.get_vocab()


def test_loader_refuses_non_local_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="never a hub id"):
        load(tmp_path / "Qwen3-8B")


def test_kv_cache_decode_equals_full_recompute(trained, tok, corpus):
    for t in corpus[::37]:
        cached = D.generate(trained, tok, [t.prompt], 40).tokens[0]
        assert cached == D.generate_full_recompute(trained, tok, t.prompt, 40)


def test_batched_left_padded_decode_equals_single(trained, tok, corpus):
    prompts = [t.prompt for t in corpus[::29]]
    batch = D.generate(trained, tok, prompts, 30).tokens
    assert batch == [D.generate(trained, tok, [p], 30).tokens[0] for p in prompts]


def test_hook_selecting_everything_equals_default_attention(trained, tok, corpus):
    prompts = [t.prompt for t in corpus[::23]]
    trained.set_attn_implementation("sdpa")
    ref = D.generate(trained, tok, prompts, 30)
    calls = []

    def everything(layer, q, k, v, **_):
        calls.append(layer)
        return torch.ones(q.shape[0], q.shape[1], k.shape[2], dtype=torch.bool)

    trained.set_attn_implementation(D.register_selector("test_select_all", everything))
    try:
        out = D.generate(trained, tok, prompts, 30)
    finally:
        trained.set_attn_implementation("sdpa")
    assert calls and out.tokens == ref.tokens


def test_hook_restricting_attention_changes_the_output(trained, tok, corpus):
    prompts = [t.prompt for t in corpus[::23]]
    ref = D.generate(trained, tok, prompts, 20).tokens

    def last_only(layer, q, k, v, **_):
        keep = torch.zeros(q.shape[0], q.shape[1], k.shape[2], dtype=torch.bool)
        keep[..., -1] = True
        return keep

    trained.set_attn_implementation(D.register_selector("test_last_only", last_only))
    try:
        assert D.generate(trained, tok, prompts, 20).tokens != ref
    finally:
        trained.set_attn_implementation("sdpa")


def test_pre_rope_queries_recorded(trained, tok):
    rec = D.QueryRecorder(trained)
    try:
        D.generate(trained, tok, ["add 1 2 ?"], 5)
    finally:
        rec.remove()
    assert set(rec.queries) == set(range(SIZE["layers"]))
    assert rec.queries[0][0].shape[-1] == SIZE["hidden"] // SIZE["heads"]


def test_sampling_is_seeded(trained, tok):
    a = D.generate(trained, tok, ["mod 7 3 + 1 ?"], 15, do_sample=True, seed=4).tokens
    b = D.generate(trained, tok, ["mod 7 3 + 1 ?"], 15, do_sample=True, seed=4).tokens
    assert a == b


def test_tpot_skips_warmup():
    assert D.tpot([10.0, 10.0, 10.0, 1.0, 2.0, 3.0], warmup=3) == 2.0
    assert np.isnan(D.tpot([1.0], warmup=3))
