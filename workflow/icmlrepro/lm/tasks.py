"""Synthetic reasoning tasks with exact answers and chain-of-thought traces of controllable length.

Every example is ``<family> <prompt> ? <trace> # <answer>``. The trace spells out each step, so
its length grows with the difficulty (the number of steps) up to thousands of tokens. Families
differ in operation and vocabulary use, so they serve as distribution shifts (OnlineSPEC) and as
in-domain / out-of-domain sets (On-Policy SFT):

- ``add``: running sum of a list of numbers ("3 + 5 = 8 ; 8 + 2 = 10 ; ...");
- ``mod``: a chain of +/* operations modulo a small prime, each step reduced;
- ``sort``: selection sort of digits with the remaining list written at every step;
- ``dyck``: depth of a bracket string after each symbol; the answer says whether it is balanced.

Text is space-separated with digits written one character at a time, so that the tokenizer
(``tokenizer.py``) gives one token per digit and arithmetic stays learnable by a tiny model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

FAMILIES = ("add", "mod", "sort", "dyck")
SEP_PROMPT, SEP_ANSWER = "?", "#"


@dataclass(frozen=True)
class Task:
    family: str
    difficulty: int
    prompt: str   # "<family> ... ?"
    trace: str    # the chain of thought
    answer: str

    @property
    def text(self) -> str:
        return f"{self.prompt} {self.trace} {SEP_ANSWER} {self.answer}"

    @property
    def target(self) -> str:
        """What the model must generate after the prompt."""
        return f"{self.trace} {SEP_ANSWER} {self.answer}"

    def to_dict(self) -> dict:
        return asdict(self)


def num(n: int) -> str:
    """Digits as separate symbols: 127 -> '1 2 7'."""
    return " ".join(str(n))


def make_add(rng: np.random.Generator, steps: int) -> Task:
    xs = rng.integers(0, 10, size=steps + 1).tolist()
    total, parts = xs[0], []
    for x in xs[1:]:
        parts.append(f"{num(total)} + {x} = {num(total + x)}")
        total += x
    prompt = "add " + " ".join(str(x) for x in xs) + f" {SEP_PROMPT}"
    return Task("add", steps, prompt, " ; ".join(parts), num(total))


def make_mod(rng: np.random.Generator, steps: int, p: int = 7) -> Task:
    v0 = v = int(rng.integers(0, p))
    ops = [("+" if rng.random() < 0.5 else "*", int(rng.integers(1, p))) for _ in range(steps)]
    parts = []
    for op, x in ops:
        nv = (v + x) % p if op == "+" else (v * x) % p
        parts.append(f"{v} {op} {x} = {nv}")
        v = nv
    prompt = f"mod {p} {v0} " + " ".join(f"{op} {x}" for op, x in ops) + f" {SEP_PROMPT}"
    return Task("mod", steps, prompt, " ; ".join(parts), str(v))


def make_sort(rng: np.random.Generator, steps: int) -> Task:
    xs = rng.integers(0, 10, size=steps).tolist()
    rest, out, parts = list(xs), [], []
    while rest:
        m = min(rest)
        rest.remove(m)
        out.append(m)
        parts.append(" ".join([str(m), "|", *map(str, rest)]))
    prompt = "sort " + " ".join(map(str, xs)) + f" {SEP_PROMPT}"
    return Task("sort", steps, prompt, " ; ".join(parts), " ".join(map(str, out)))


def make_dyck(rng: np.random.Generator, steps: int) -> Task:
    depth, s, parts, ok = 0, [], [], True
    for _ in range(steps):
        c = "(" if (depth == 0 or rng.random() < 0.5) else ")"
        if rng.random() < 0.05:  # occasional wrong closing makes some strings unbalanced
            c = ")"
        depth += 1 if c == "(" else -1
        ok = ok and depth >= 0
        s.append(c)
        parts.append(f"{c} {num(max(depth, 0)) if depth >= 0 else '-'}")
        if depth < 0:
            depth = 0
    balanced = ok and depth == 0
    prompt = "dyck " + " ".join(s) + f" {SEP_PROMPT}"
    return Task("dyck", steps, prompt, " ; ".join(parts), "yes" if balanced else "no")


MAKERS = {"add": make_add, "mod": make_mod, "sort": make_sort, "dyck": make_dyck}


def generate(family: str, n: int, steps: tuple[int, int], rng: np.random.Generator) -> list[Task]:
    """``n`` tasks of one family with a number of steps drawn uniformly from ``steps`` (inclusive)."""
    if family not in MAKERS:
        raise ValueError(f"unknown task family {family!r} (known: {', '.join(FAMILIES)})")
    lo, hi = steps
    return [MAKERS[family](rng, int(rng.integers(lo, hi + 1))) for _ in range(n)]


def extract_answer(generated: str) -> str | None:
    """The answer in a generated continuation: the text after the last '#', or None if there is none."""
    if SEP_ANSWER not in generated:
        return None
    return " ".join(generated.rsplit(SEP_ANSWER, 1)[1].split())


def check(task: Task, generated: str) -> bool:
    """Exact answer checking: the generated answer must equal the true one token for token."""
    return extract_answer(generated) == task.answer
