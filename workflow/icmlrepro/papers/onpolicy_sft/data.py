"""Stage ``onpolicy_sft.data``: pretraining corpus, target and out-of-domain task sets, tokenizer.

- pretraining (the base model's own distribution): every family in the native style (the target family over
  ``pretrain.target_steps_range`` where set, so that the base model is unreliable on the target's lengths
  rather than unable), plus hint
  prompts (target-family questions with a worked solution, half in the native style and half in the target
  style, before the '?') followed by the native trace: the model learns to read either style and to
  write its own; hint prompts span ``hint_steps_range``, up to the target's lengths, as a chat model
  has read solutions of problems it cannot yet solve alone;
- target (fine-tuning, in-domain): target-family problems with more steps than pretraining showed, per seed
  a train / validation / test split of distinct problems; the train solutions are restyled;
- out-of-domain: the other families in the native style at pretraining difficulty (generalization and
  forgetting after fine-tuning on the target family), redrawn per seed; a yes/no family is balanced.
Test and validation problems never appear in training (checked: prompts are disjoint).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from icmlrepro.core.io import atomic_dir, write_parquet
from icmlrepro.core.seeding import derive_seed
from icmlrepro.lm.data import tasks_from_table
from icmlrepro.lm.tasks import Task, generate

from .styles import THEN, hint_prompt, restyle

def _tasks(family: str, n: int, steps, *keys) -> list[Task]:
    return generate(family, n, tuple(steps), np.random.default_rng(derive_seed(*keys)))


def _distinct(tasks: list[Task], exclude: set[str]) -> list[Task]:
    seen, out = set(exclude), []
    for t in tasks:
        if t.prompt not in seen:
            seen.add(t.prompt)
            out.append(t)
    return out


def style_of(p: dict) -> str:
    """The ground truth's writing style (config ``target.style``; ``swap`` where unset)."""
    return p.get("target", {}).get("style", "swap")


def written_joiner(task: Task, share: float, rng: np.random.Generator) -> Task:
    """The task with each step boundary ' ; ' written as the target style's ' then ' with probability ``share``,
    independently per boundary (config ``pretrain.written_joiner_share``): the base model then writes the target
    style's joiner itself, rarely (log p about log(share) at every boundary), as a chat model assigns a
    human-written solution's wording a low but not vanishing probability."""
    parts = task.trace.split(" ; ")
    out = parts[0]
    for part in parts[1:]:
        out += (f" {THEN} " if rng.random() < share else " ; ") + part
    return replace(task, trace=out)


def pretrain_table(p: dict) -> pd.DataFrame:
    """Rows (family, difficulty, prompt, trace, answer, question) the base model is trained on (native
    style); ``question`` is the prompt without its hint, so that no target problem was seen with a hint."""
    base, pre = p["seeds"][0], p["pretrain"]
    rows = []
    share = float(pre.get("written_joiner_share", 0.0))
    joiner_rng = np.random.default_rng(derive_seed(base, "pre", "written-joiner"))
    for fam in [p["target_family"], *p["ood_families"]]:
        steps = pre.get("target_steps_range", pre["steps_range"]) if fam == p["target_family"] else pre["steps_range"]
        tasks = _tasks(fam, pre["n_per_family"], steps, base, "pre", fam)
        if fam == p["target_family"] and share > 0:
            tasks = [written_joiner(t, share, joiner_rng) for t in tasks]
        rows += [{**t.to_dict(), "question": t.prompt} for t in tasks]
    rng = np.random.default_rng(derive_seed(base, "pre", "hint-style"))
    for t in _tasks(p["target_family"], pre["n_hint"], pre["hint_steps_range"], base, "pre", "hint"):
        shown = restyle(t, style_of(p)) if rng.random() < 0.5 else t
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
                             "styled_trace": restyle(task, style_of(p)).trace})
            start += n
    return pd.DataFrame(rows)


def ood_table(p: dict, pretrain_prompts: set[str]) -> pd.DataFrame:
    """Per seed (redrawn, like the target split): the other families in the native style, none seen in
    pretraining. A yes/no family (``dyck``) is drawn balanced, half of each answer, since a set that is
    mostly "no" is passed by always answering "no"; the answer shares are measured in evaluation
    (``answer_shares``)."""
    o, rows = p["ood"], []
    for seed in p["seeds"]:
        for fam in p["ood_families"]:
            pool = _distinct(_tasks(fam, 20 * o["n_per_family"], o["steps_range"], seed, "ood", fam), pretrain_prompts)
            if fam == "dyck":
                half = o["n_per_family"] // 2
                yes, no = [t for t in pool if t.answer == "yes"], [t for t in pool if t.answer == "no"]
                if min(len(yes), len(no)) < half:
                    raise ValueError("too few distinct dyck strings of one answer; widen ood.steps_range")
                picked = yes[:half] + no[: o["n_per_family"] - half]
            else:
                if len(pool) < o["n_per_family"]:
                    raise ValueError(f"too few distinct {fam} problems; widen ood.steps_range")
                picked = pool[: o["n_per_family"]]
            rows += [{"seed": seed, **t.to_dict()} for t in picked]
    return pd.DataFrame(rows)


def answer_shares(table: pd.DataFrame) -> dict[str, float]:
    """Per family, the share of its most common answer: the accuracy of always giving that answer."""
    return {fam: float(g["answer"].value_counts(normalize=True).iloc[0]) for fam, g in table.groupby("family")}


def run(job) -> None:
    p = job.params
    pre = pretrain_table(p)
    target = target_table(p, set(pre["question"]))
    ood = ood_table(p, set(pre["question"]))
    write_parquet(job.output.pretrain, pre)
    write_parquet(job.output.target, target)
    write_parquet(job.output.ood, ood)
    with atomic_dir(job.output.tokenizer) as tmp:
        build_tokenizer(pre, target, ood).save_pretrained(tmp)


def build_tokenizer(pre: pd.DataFrame, target: pd.DataFrame, ood: pd.DataFrame):
    """The word-level tokenizer: vocabulary (and its id order, by frequency) from the pretraining corpus alone, so
    that the base model depends on the pretraining settings only (with the target and out-of-domain sets in it,
    adding a seed or changing the out-of-domain lengths re-ordered the ids and pretrained another base model);
    raises if a target (either style) or out-of-domain text has a word the pretraining corpus lacks."""
    from icmlrepro.lm.tokenizer import train_tokenizer  # lazy: transformers

    tok = train_tokenizer([t.text for t in tasks_from_table(pre)])
    styled = [Task(r.family, r.difficulty, r.prompt, r.styled_trace, r.answer).text for r in target.itertuples()]
    unknown = [x for x in [t.text for t in tasks_from_table(pd.concat([target, ood]))] + styled
               if tok.unk_token_id in tok(x)["input_ids"]]
    if unknown:
        raise ValueError(f"{len(unknown)} target / out-of-domain texts have words the pretraining corpus lacks, "
                         f"e.g. {unknown[0]!r}")
    return tok
