"""Stage ``onpolicy_sft.data``: pretraining corpus, target and out-of-domain task sets, tokenizer.

- pretraining (the base model's own distribution): every family in the native style, plus hint
  prompts (target-family questions with a worked solution, half in the native style and half in the target
  style, before the '?') followed by the native trace: the model learns to read either style and to
  write its own; hint prompts span ``hint_steps_range``, up to the target's lengths, as a chat model
  has read solutions of problems it cannot yet solve alone;
- target (fine-tuning, in-domain): target-family (``mod``) problems with more steps than pretraining showed, per seed
  a train / validation / test split of distinct problems; the train solutions are restyled;
- out-of-domain: the other families in the native style at pretraining difficulty (generalization and
  forgetting after fine-tuning on the target family).
Test and validation problems never appear in training (checked: prompts are disjoint).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import atomic_dir, write_parquet
from icmlrepro.core.seeding import derive_seed
from icmlrepro.lm.data import tasks_from_table
from icmlrepro.lm.tasks import Task, generate

from .styles import hint_prompt, restyle

def _tasks(family: str, n: int, steps, *keys) -> list[Task]:
    return generate(family, n, tuple(steps), np.random.default_rng(derive_seed(*keys)))


def _distinct(tasks: list[Task], exclude: set[str]) -> list[Task]:
    seen, out = set(exclude), []
    for t in tasks:
        if t.prompt not in seen:
            seen.add(t.prompt)
            out.append(t)
    return out


def pretrain_table(p: dict) -> pd.DataFrame:
    """Rows (family, difficulty, prompt, trace, answer, question) the base model is trained on (native
    style); ``question`` is the prompt without its hint, so that no target problem was seen with a hint."""
    base, pre = p["seeds"][0], p["pretrain"]
    rows = []
    for fam in [p["target_family"], *p["ood_families"]]:
        rows += [{**t.to_dict(), "question": t.prompt}
                 for t in _tasks(fam, pre["n_per_family"], pre["steps_range"], base, "pre", fam)]
    rng = np.random.default_rng(derive_seed(base, "pre", "hint-style"))
    for t in _tasks(p["target_family"], pre["n_hint"], pre["hint_steps_range"], base, "pre", "hint"):
        shown = restyle(t) if rng.random() < 0.5 else t
        rows.append({**t.to_dict(), "prompt": hint_prompt(t, shown), "question": t.prompt})
    return pd.DataFrame(rows)


def target_table(p: dict, pretrain_prompts: set[str]) -> pd.DataFrame:
    """Per seed: train / val / test target-family problems (distinct, none seen in pretraining)."""
    t, rows = p["target"], []
    sizes = {"train": t["n_train"], "val": t["n_val"], "test": t["n_test"]}
    for seed in p["seeds"]:
        pool = _distinct(_tasks(p["target_family"], 2 * sum(sizes.values()), t["steps_range"], seed, "target"),
                         pretrain_prompts)
        if len(pool) < sum(sizes.values()):
            raise ValueError("too few distinct target problems; widen target.steps_range")
        start = 0
        for split, n in sizes.items():
            for i, task in enumerate(pool[start: start + n]):
                rows.append({"seed": seed, "split": split, "problem": i, **task.to_dict(),
                             "styled_trace": restyle(task).trace})
            start += n
    return pd.DataFrame(rows)


def ood_table(p: dict, pretrain_prompts: set[str]) -> pd.DataFrame:
    """The other families in the native style, none seen in pretraining (fixed across seeds: every
    replicate is scored on the same set)."""
    o = p["ood"]
    return pd.DataFrame([t.to_dict() for fam in p["ood_families"]
                         for t in _distinct(_tasks(fam, o["n_per_family"], o["steps_range"], p["seeds"][0], "ood",
                                                   fam), pretrain_prompts)])


def run(job) -> None:
    p = job.params
    pre = pretrain_table(p)
    target = target_table(p, set(pre["question"]))
    ood = ood_table(p, set(pre["question"]))
    write_parquet(job.output.pretrain, pre)
    write_parquet(job.output.target, target)
    write_parquet(job.output.ood, ood)
    from icmlrepro.lm.tokenizer import train_tokenizer  # lazy: transformers

    styled = [Task(r.family, r.difficulty, r.prompt, r.styled_trace, r.answer).text for r in target.itertuples()]
    texts = [t.text for t in tasks_from_table(pd.concat([pre, target, ood]))] + styled
    with atomic_dir(job.output.tokenizer) as tmp:
        train_tokenizer(texts).save_pretrained(tmp)
