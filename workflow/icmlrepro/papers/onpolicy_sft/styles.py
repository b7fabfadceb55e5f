"""The target set's other writing style, and the hint prompts Hinted Decoding conditions on.

The base model learns traces in the substrate's native style (``sort``: "1 | 3 2 ; 2 | 3 ; 3 |",
the smallest digit, then what is left). The fine-tuning target's ground-truth solutions are written in
another style (config ``target.style``): ``joiner``, the same steps joined by "then" ("1 | 3 2 then 2 | 3
then 3 |"), or ``swap``, also the two sides swapped ("3 2 | 1 then 3 | 2 then | 3"); ``add`` and ``mod``
have the same restylings (operands swapped). The answer after '#' is the same in
both, so accuracy (lm.tasks.check) is style-blind. During pretraining the model *reads* solutions of
both styles inside hint prompts ("sort 3 1 2 hint <solution> ?") but is only ever trained to *write* the
native style, as a chat model reads any text and writes in its own voice.
"""

from __future__ import annotations

from dataclasses import replace

from icmlrepro.lm.tasks import SEP_ANSWER, SEP_PROMPT, Task, num

HINT = "hint"
THEN = "then"


def add_terms(task: Task) -> list[int]:
    """The numbers of an ``add`` prompt ("add 3 5 2 ?" -> [3, 5, 2])."""
    words = task.prompt.split()
    if words[0] != "add" or words[-1] != SEP_PROMPT:
        raise ValueError(f"not an add prompt: {task.prompt!r}")
    return [int(w) for w in words[1:-1]]


def mod_ops(task: Task) -> tuple[int, int, list[tuple[str, int]]]:
    """Modulus, start value and operations of a ``mod`` prompt ("mod 7 3 + 4 * 2 ?")."""
    words = task.prompt.split()
    if words[0] != "mod" or words[-1] != SEP_PROMPT:
        raise ValueError(f"not a mod prompt: {task.prompt!r}")
    body = words[3:-1]
    return int(words[1]), int(words[2]), [(body[i], int(body[i + 1])) for i in range(0, len(body), 2)]


def sort_terms(task: Task) -> list[int]:
    """The digits of a ``sort`` prompt ("sort 3 1 2 ?" -> [3, 1, 2])."""
    words = task.prompt.split()
    if words[0] != "sort" or words[-1] != SEP_PROMPT:
        raise ValueError(f"not a sort prompt: {task.prompt!r}")
    return [int(w) for w in words[1:-1]]


def _restyled_steps(task: Task) -> tuple[list[str], str]:
    if task.family == "add":
        xs = add_terms(task)
        total, parts = xs[0], []
        for x in xs[1:]:
            parts.append(f"{x} + {num(total)} = {num(total + x)}")
            total += x
        return parts, num(total)
    if task.family == "mod":
        p, v, ops = mod_ops(task)
        parts = []
        for op, x in ops:
            nv = (v + x) % p if op == "+" else (v * x) % p
            parts.append(f"{x} {op} {v} = {nv}")
            v = nv
        return parts, str(v)
    if task.family == "sort":
        rest, parts, out = sort_terms(task), [], []
        while rest:
            m = min(rest)
            rest.remove(m)
            out.append(m)
            parts.append(" ".join([*map(str, rest), "|", str(m)]))
        return parts, " ".join(map(str, out))
    raise ValueError(f"no target style for family {task.family!r} (have: add, mod, sort)")


STYLES = ("swap", "joiner")


def restyle(task: Task, style: str = "swap") -> Task:
    """The same task with its trace in the target style; same prompt, same answer.

    - ``swap``: the two sides of every step swapped and steps joined by "then" (every token of a step sits
      where the model never writes it);
    - ``joiner``: the model's own steps, joined by "then" instead of ";" (only the joiner is foreign: the
      content a model can learn from is written as it would write it, the style differs in one token a step).
    """
    if style == "joiner":
        if task.family not in ("add", "mod", "sort"):
            raise ValueError(f"no target style for family {task.family!r} (have: add, mod, sort)")
        return replace(task, trace=task.trace.replace(" ; ", f" {THEN} "))
    if style != "swap":
        raise ValueError(f"unknown target style {style!r} (have: {', '.join(STYLES)})")
    parts, answer = _restyled_steps(task)
    if answer != task.answer:
        raise ValueError(f"restyled result {answer!r} disagrees with the answer {task.answer!r}")
    return replace(task, trace=f" {THEN} ".join(parts))


def solution(task: Task) -> str:
    """Trace and answer, as they follow the prompt ("<trace> # <answer>")."""
    return f"{task.trace} {SEP_ANSWER} {task.answer}"


def hint_prompt(task: Task, hint: Task) -> str:
    """The hinted stream's prompt: the question with a worked solution (``hint``) before the '?'."""
    if not task.prompt.endswith(SEP_PROMPT):
        raise ValueError(f"prompt does not end with {SEP_PROMPT!r}: {task.prompt!r}")
    return f"{task.prompt[:-1].rstrip()} {HINT} {solution(hint)} {SEP_PROMPT}"
