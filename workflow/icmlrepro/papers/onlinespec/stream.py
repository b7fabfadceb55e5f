"""Stage ``onlinespec.stream``: a prompt stream with distribution shifts, and its verification feedback.

The stream is a sequence of chunks; each phase of ``chunks_per_phase`` chunks draws its prompts from one
task family of the substrate, and the family changes from phase to phase (``schedule``), so the draft
faces shifts. The target's greedy outputs and its distributions along them (what verification passes
compute, ``feedback.collect``) are stored with the prompts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.device import torch_device
from icmlrepro.core.io import write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.lm.model import load
from icmlrepro.lm.tasks import generate

from .feedback import Feedback, collect


def stream_tasks(schedule: list[str], chunks_per_phase: int, chunk_size: int, steps, seed: int) -> pd.DataFrame:
    rows = []
    for phase, family in enumerate(schedule):
        rng = np.random.default_rng(derive_seed(seed, "onlinespec", "stream", phase))
        for t_i, t in enumerate(generate(family, chunks_per_phase * chunk_size, tuple(steps), rng)):
            rows.append({"chunk": phase * chunks_per_phase + t_i // chunk_size, "phase": phase, "family": family,
                         "prompt": t.prompt})
    return pd.DataFrame(rows)


def to_table(df: pd.DataFrame, fb: Feedback) -> pd.DataFrame:
    df = df.copy()
    df["ids"] = fb.ids
    df["start"] = fb.start
    df["vocab"] = [int(p.shape[-1]) for p in fb.target_probs]
    df["target_probs"] = [p.numpy().astype(np.float32).ravel() for p in fb.target_probs]
    return df


def feedback_of(df: pd.DataFrame, device="cpu") -> Feedback:
    """Rows of a stream table back to a :class:`Feedback` (in row order), distributions on ``device``."""
    probs = [torch.from_numpy(np.asarray(p, dtype=np.float32).reshape(-1, v)).to(device)
             for p, v in zip(df.target_probs, df.vocab)]
    return Feedback([list(map(int, x)) for x in df.ids], [int(s) for s in df.start], probs)


def run(job) -> None:
    p = job.params
    seed = int(job.wildcards.seed)
    seed_everything(seed)
    target, tok = load(job.input.target, torch_device())
    df = stream_tasks(p["schedule"], p["chunks_per_phase"], p["chunk_size"], p["steps_range"], seed)
    fb = collect(target, tok, df.prompt.tolist(), p["max_new_tokens"], p["feedback_batch_size"])
    write_parquet(job.output.stream, to_table(df, fb))
