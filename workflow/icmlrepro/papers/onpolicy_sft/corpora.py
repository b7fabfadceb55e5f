"""The training corpora every arm fine-tunes on, built from the base model and one seed's target problems.

- ``ground_truth``: the target-style solutions (off-policy);
- ``self``: the model's own first correct sample per problem (plain prompt, temperature T; on-policy);
- ``ground_truth_matched``: ground truth of exactly the problems ``self`` covers (its off-policy twin);
- ``hinted``: Hinted Decoding with beta > 0; ``hinted_beta0``: the hinted stream alone (beta = 0); with
  ``hinted_keep: correct`` their rows with a wrong answer are kept (column ``correct``) but not trained on
  (column ``train``), as the own-sample corpus keeps only correct samples;
- preference pairs (``pair_chosen``): the model's own first correct sample (``self``: offline RL on the model's
  own samples, problems with both a correct and a wrong sample) or the ground truth (``ground_truth``) as chosen,
  the model's own first wrong sample as rejected.
Generation is timed (``cost_clock``), since it is part of each pipeline's cost. Every corpus row carries
its sequence phi under the base model (``ddt.sequence_phi``).
"""

from __future__ import annotations

import time

import pandas as pd
import torch

from icmlrepro.lm.decode import generate
from icmlrepro.lm.tasks import Task, check
from icmlrepro.lm.train import collate

from .arms import CORPORA
from .ddt import sequence_phi
from .hinted import hinted_generate
from .styles import hint_prompt, solution



def cost_clock(device) -> float:
    """The cost clock: CPU seconds of this (single-threaded) process on CPU, where wall time on a shared
    machine would measure the neighbours; synchronised wall seconds on CUDA, where the work is the GPU's."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)
        return time.perf_counter()
    return time.process_time()


def encode(tokenizer, prompt: str, completion: str) -> tuple[list[int], int]:
    """(ids of prompt + completion + EOS, index where the completion starts)."""
    head = tokenizer(prompt)["input_ids"]
    full = tokenizer(f"{prompt} {completion}")["input_ids"] + [tokenizer.eos_token_id]
    if full[: len(head)] != head:
        raise ValueError(f"prompt does not tokenize as a prefix of its example: {prompt!r}")
    return full, len(head)


def batches(tokenizer, rows: list[tuple[str, str]], size: int):
    enc = [encode(tokenizer, p, c) for p, c in rows]
    for i in range(0, len(enc), size):
        yield collate(enc[i: i + size], tokenizer.pad_token_id)


def _decode(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


def sample(model, tokenizer, tasks: list[Task], k: int, s: dict, seed: int) -> list[list[str]]:
    """``k`` completions per task sampled from the plain prompt."""
    prompts = [t.prompt for t in tasks for _ in range(k)]
    texts = []
    for i in range(0, len(prompts), s["gen_batch"]):
        g = generate(model, tokenizer, prompts[i: i + s["gen_batch"]], s["max_new_tokens"], do_sample=True,
                     temperature=s["temperature"], seed=seed + i)
        texts += [_decode(tokenizer, t) for t in g.tokens]
    return [texts[j * k: (j + 1) * k] for j in range(len(tasks))]


def hinted(model, tokenizer, tasks: list[Task], styled: list[Task], beta: float, s: dict, seed: int):
    texts, lams = [], []
    for i in range(0, len(tasks), s["gen_batch"]):
        chunk, hints = tasks[i: i + s["gen_batch"]], styled[i: i + s["gen_batch"]]
        ids, lam = hinted_generate(model, tokenizer, [t.prompt for t in chunk],
                                   [hint_prompt(t, h) for t, h in zip(chunk, hints)], s["max_new_tokens"],
                                   beta, s["hint_temperature"], seed + i)
        texts += [_decode(tokenizer, t) for t in ids]
        lams += lam
    return texts, lams


def own_pairs(tasks: list[Task], samples: list[list[str]]) -> list[tuple[str, str, str]]:
    """On-policy preference pairs: (prompt, first correct sample, first wrong sample) of every problem whose
    samples hold both."""
    out = []
    for t, outs in zip(tasks, samples):
        good = [o for o in outs if check(t, o)]
        bad = [o for o in outs if not check(t, o)]
        if good and bad:
            out.append((t.prompt, good[0], bad[0]))
    return out


def build(model, tokenizer, tasks: list[Task], styled: list[Task], s: dict, seed: int):
    """(corpus table, preference pairs, generation seconds by product)."""
    rows, seconds = [], {}
    for i, (t, st) in enumerate(zip(tasks, styled)):
        rows.append({"corpus": "ground_truth", "problem": i, "prompt": t.prompt, "completion": solution(st),
                     "correct": True, "lam": float("nan")})
    t0 = cost_clock(model.device)
    samples = sample(model, tokenizer, tasks, s["samples_per_problem"], s, seed)
    seconds["sampling"] = cost_clock(model.device) - t0
    pairs = []
    for i, (t, st, outs) in enumerate(zip(tasks, styled, samples)):
        good = [o for o in outs if check(t, o)]
        bad = [o for o in outs if not check(t, o)]
        if good:
            rows.append({"corpus": "self", "problem": i, "prompt": t.prompt, "completion": good[0], "correct": True,
                         "lam": float("nan")})
            rows.append({"corpus": "ground_truth_matched", "problem": i, "prompt": t.prompt,
                         "completion": solution(st), "correct": True, "lam": float("nan")})
        if bad and s.get("pair_chosen", "ground_truth") == "ground_truth":
            pairs.append({"problem": i, "prompt": t.prompt, "chosen": solution(st), "rejected": bad[0]})
        elif bad and good:  # on-policy pairs: the model's own correct vs its own wrong sample of one problem
            pairs.append({"problem": i, "prompt": t.prompt, "chosen": good[0], "rejected": bad[0]})
    for name, beta in (("hinted", s["hint_beta"]), ("hinted_beta0", 0.0)):
        t0 = cost_clock(model.device)
        texts, lams = hinted(model, tokenizer, tasks, styled, beta, s, seed)
        seconds[name] = cost_clock(model.device) - t0
        rows += [{"corpus": name, "problem": i, "prompt": t.prompt, "completion": x, "correct": bool(check(t, x)),
                  "lam": lam} for i, (t, x, lam) in enumerate(zip(tasks, texts, lams))]
    table = pd.DataFrame(rows)
    # the rows each arm fine-tunes on: every row, or (corpora.hinted_keep: correct) the hinted re-generations
    # with the right answer only, as the own-sample corpus keeps only correct samples
    wrong_hinted = table["corpus"].isin(["hinted", "hinted_beta0"]) & ~table["correct"].astype(bool)
    table["train"] = ~wrong_hinted if s.get("hinted_keep", "all") == "correct" else True
    table["phi"] = sequence_phi(model, batches(tokenizer, list(zip(table["prompt"], table["completion"])),
                                               s["gen_batch"]))
    return table, pd.DataFrame(pairs, columns=["problem", "prompt", "chosen", "rejected"]), seconds
