"""A grounded-VQA world with a planted shortcut.

A scene is a ``grid x grid`` map of cells; ``n_objects`` cells hold an object with three attributes
(colour, shape, pattern; ``n_values`` values each). A cell is "rendered" as a feature vector: one one-hot
block per attribute plus an occupancy flag for an object cell; an empty cell shows the background, whose
tint (one of ``n_values``) is a one-hot block of its own; Gaussian pixel noise on every cell. A question
names a task (which attribute is asked, which one identifies the object) and the identifying value;
exactly one object has it (the target, whose cell is the ground-truth evidence). The answer is the
target's value of the asked attribute. The question never carries the answer.

The shortcut: in training scenes, with probability ``cue_rate``, the background tint equals the answer's
value index, so the global context gives the answer without looking at the target (a background/answer
correlation, spread over every empty cell, which masking one cell does not remove). Splits: ``train``,
``val`` and ``test_id`` follow that law (fresh scenes; otherwise the tint is uniform); ``test_broken`` breaks
the cue: the tint is never the answer, so the shortcut answers wrongly. ``val`` (drawn like ``train``, its
own seed stream) only picks each arm's learning rate; the test splits are never used for a choice.

Every seed draws its own world (all four splits from its own seed stream), so the interval over seeds covers
data sampling as well as training noise. A split file holds every seed's arrays under ``"<seed>.<name>"``.
"""

from __future__ import annotations

import numpy as np

from icmlrepro.core.io import read_npz, write_json, write_npz
from icmlrepro.core.seeding import derive_seed

ATTRS = ("colour", "shape", "pattern")
TASKS = {  # task: (identifying attribute, asked attribute)
    "colour_of_shape": ("shape", "colour"),
    "shape_of_colour": ("colour", "shape"),
    "pattern_of_shape": ("shape", "pattern"),
}
SPLITS = ("train", "val", "test_id", "test_broken")
SIZE_KEY = {"train": "n_train", "val": "n_val", "test_id": "n_test", "test_broken": "n_test"}


def feature_dim(n_values: int) -> int:
    """Attribute one-hots, occupancy flag, background tint one-hot."""
    return len(ATTRS) * n_values + 1 + n_values


def question_dim(n_values: int) -> int:
    return len(TASKS) + n_values


def make_split(n: int, s: dict, split: str, seed: int) -> dict[str, np.ndarray]:
    """``n`` scenes of one split (see the module docstring for the laws)."""
    rng = np.random.default_rng(derive_seed(seed, "cofactgvr", "data", split))
    K, n_cells, n_obj = s["n_values"], s["grid"] ** 2, s["n_objects"]
    assert n_obj <= K, "the identifying value must be unique: at most n_values objects"
    tasks = list(TASKS)
    task = rng.integers(len(tasks), size=n)
    attrs = np.zeros((n, n_obj, len(ATTRS)), dtype=np.int64)  # object 0 is the target
    tint = rng.integers(K, size=n)
    for i in range(n):
        q_attr = ATTRS.index(TASKS[tasks[task[i]]][0])
        attrs[i] = rng.integers(K, size=(n_obj, len(ATTRS)))
        attrs[i, :, q_attr] = rng.permutation(K)[:n_obj]  # distinct identifying values: the target is unique
    a_attr = np.array([ATTRS.index(TASKS[tasks[t]][1]) for t in task])
    answer = attrs[np.arange(n), 0, a_attr]
    if split == "test_broken":
        tint = (answer + rng.integers(1, K, size=n)) % K  # any value but the answer
        cue = np.zeros(n, dtype=bool)
    else:
        cue = rng.random(n) < s["cue_rate"]
        tint = np.where(cue, answer, tint)
    cells = np.stack([rng.permutation(n_cells)[:n_obj] for _ in range(n)])
    x = rng.normal(0.0, s["noise"], size=(n, n_cells, feature_dim(K))).astype(np.float32)
    rows = np.arange(n)[:, None]
    occupied = np.zeros((n, n_cells), dtype=bool)
    occupied[rows, cells] = True
    for a in range(len(ATTRS)):
        x[rows, cells, a * K + attrs[:, :, a]] += 1.0
    x[rows, cells, len(ATTRS) * K] += 1.0
    background = np.zeros((n, n_cells, K), dtype=np.float32)
    background[np.arange(n), :, tint] = 1.0
    x[..., len(ATTRS) * K + 1:] += background * ~occupied[..., None]
    q = np.zeros((n, question_dim(K)), dtype=np.float32)
    q[np.arange(n), task] = 1.0
    q_attr = np.array([ATTRS.index(TASKS[tasks[t]][0]) for t in task])
    q[np.arange(n), len(TASKS) + attrs[np.arange(n), 0, q_attr]] = 1.0
    return {"x": x, "q": q, "answer": answer, "target_cell": cells[:, 0], "task": task, "cue": cue,
            "cells": cells, "attrs": attrs, "tint": tint}


def load_split(path, seed: int) -> dict[str, np.ndarray]:
    """One seed's arrays of a split file."""
    prefix = f"{int(seed)}."
    arrays = {k[len(prefix):]: v for k, v in read_npz(path).items() if k.startswith(prefix)}
    if not arrays:
        raise KeyError(f"{path} holds no arrays of seed {seed}")
    return arrays


def tint_answer_share(split: dict[str, np.ndarray]) -> float:
    """Share of scenes whose background tint equals the answer (the cue-only rule's accuracy)."""
    return float((split["tint"] == split["answer"]).mean())


def run(job) -> None:
    s = job.params
    summary = {}
    for split in SPLITS:
        arrays, per_seed = {}, {}
        for seed in s["seeds"]:
            d = make_split(s[SIZE_KEY[split]], s, split, seed)
            arrays |= {f"{int(seed)}.{k}": v for k, v in d.items()}
            per_seed[str(seed)] = {"n": len(d["answer"]), "cue_share": float(d["cue"].mean()),
                                   "shortcut_accuracy": tint_answer_share(d)}
        write_npz(job.output[split], arrays)
        summary[split] = {"per_seed": per_seed,
                          "shortcut_accuracy_mean": float(np.mean([v["shortcut_accuracy"] for v in per_seed.values()]))}
    write_json(job.output.summary, summary)
