"""Stage ``lm.data``: the task sets (train and evaluation, every family) and the trained tokenizer."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import atomic_dir, write_parquet
from icmlrepro.core.seeding import derive_seed

from .tasks import FAMILIES, Task, generate


def task_table(n: int, steps, seed: int, split: str, families=FAMILIES) -> pd.DataFrame:
    rows = []
    for fam in families:
        rng = np.random.default_rng(derive_seed(seed, "lm", split, fam))
        rows += [t.to_dict() for t in generate(fam, n, tuple(steps), rng)]
    return pd.DataFrame(rows)


def tasks_from_table(df: pd.DataFrame) -> list[Task]:
    return [Task(**r) for r in df[["family", "difficulty", "prompt", "trace", "answer"]].to_dict("records")]


def run(job) -> None:
    p = job.params
    train = task_table(p["n_train"], p["train_steps_range"], p["seeds"][0], "train", p["families"])
    evals = task_table(p["n_eval"], p["eval_steps_range"], p["seeds"][0], "eval", p["families"])
    write_parquet(job.output.train, train)
    write_parquet(job.output.eval, evals)
    from .tokenizer import train_tokenizer  # here: it imports transformers, which the task tables
    # (read by papers' data stages through this module) do not need

    tok = train_tokenizer(t.text for t in tasks_from_table(pd.concat([train, evals])))
    with atomic_dir(job.output.tokenizer) as tmp:
        tok.save_pretrained(tmp)
