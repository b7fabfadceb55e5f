"""Localization tasks: synthetic issues written from real functions, with the target's name masked.

No LLM is at hand to paraphrase, so an issue is assembled from what a reporter could know
about a real function without naming it, in one of three styles.

The style is drawn uniformly among those the function allows (``caller`` needs a caller,
``error`` a raised message):

* ``behaviour``: a sample of the words of the function's docstring summary (what it does),
  or, without a docstring, of the identifiers its body uses;
* ``caller``: the public entry point the reporter called (a real caller of the target, from
  the invokes edges) plus a description of the faulty step, as in issues whose fix lands in a
  helper (the case structure-aware navigation is for);
* ``error``: the message of an exception the function raises, plus a few words of its behaviour.

Words are kept with probability ``keep``, so the query never repeats the docstring. Every word
that is the target's name or shares a word token with it is masked (:func:`.news.mask_words`),
so a search for the name itself cannot succeed. Only functions and methods with enough words
left after masking are eligible.

Two queries are written per task. The main one also masks the target's *location* (every word
sharing a token with its file's stem or its class, :func:`.leaks.mask_location`): a query that
names the file is answered by the path, not by the description. The *prefixed* one, reported
beside it, keeps those words and, with probability ``mention``, says where the reporter met the
problem (``In module.Class:``), as real reports mostly do. The description words sampled from the
target's own text are returned too: each stays in the target's indexed text with probability
``copied_kept`` and is otherwise listed in ``removed``, which localization takes out of the target's
own indexed text (code and feature phrase). A reporter describes a function in their own words.
``copied_kept`` is the difficulty knob: at 0.2 a synthetic issue shares about as many of its words
with its target's text as the real changelog entries share with theirs (0.22 on average), yet it is
much harder (a removed word stays in the query and in the target's neighbours); the default, 0.4,
is calibrated so that the dependency-graph baseline sits inside its band (claims file).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .leaks import location_leak, mask_location, overlap
from .news import mask_words
from .text import split_identifier, tokenize

STYLES = ("behaviour", "caller", "error")
OPENINGS = ("Unexpected behaviour in the code that", "Wrong result from the part that",
            "Bug report: something is off where the library", "Regression in the routine that")
SYMPTOMS = ("gives a wrong result", "raises an unexpected error", "behaves unexpectedly", "misbehaves")
FRAMES = ("Calling", "The fault seems to be in a step it relies on that", "I get the error", "and the code",
          "It happens where the library")
TEMPLATE_TOKENS = frozenset(tokenize(" ".join(OPENINGS + SYMPTOMS + FRAMES)))  # not content: left out of overlaps


TASK_COLUMNS = ["task", "repo", "gold", "gold_file", "template", "query", "query_prefixed", "removed",
                "location_leak", "location_leak_main", "overlap_indexed", "overlap_after"]


def indexed_tokens(unit) -> set[str]:
    """The tokens of a unit's own indexed text: its code document (path, qualified name, source) and
    its feature phrase (:class:`.navigation.RepoIndex`)."""
    return set(tokenize(f"{unit.path} {unit.qualname} {unit.code}")) | set(tokenize(unit.text))


def with_leak_columns(tasks: pd.DataFrame, nodes: pd.DataFrame) -> pd.DataFrame:
    """Add what each task gives away: whether its prefixed (and its main) query leaks the location, and the share of
    the main query's tokens in the gold unit's indexed text before and after the ``removed`` words go
    (``nodes``: the node table of the tasks' repository)."""
    tasks = tasks.copy()
    units = nodes.set_index("id")
    leak, leak_main, before, after = [], [], [], []
    for t in tasks.itertuples(index=False):
        u = units.loc[t.gold]
        leak.append(location_leak(t.query_prefixed, t.gold_file, u.parent or None))
        leak_main.append(location_leak(t.query, t.gold_file, u.parent or None))
        own = indexed_tokens(u)
        before.append(overlap(t.query, own, TEMPLATE_TOKENS))
        after.append(overlap(t.query, own - set(t.removed), TEMPLATE_TOKENS))
    tasks["location_leak"], tasks["location_leak_main"] = leak, leak_main
    tasks["overlap_indexed"], tasks["overlap_after"] = before, after
    return tasks[TASK_COLUMNS]


def _doc_words(doc: str) -> list[str]:
    para = doc.strip().split("\n\n", 1)[0]
    return [w.strip(".,;:()`'\"") for w in para.split() if any(c.isalpha() for c in w)]


def _content(words: list[str], banned: set[str]) -> list[str]:
    """Words that still carry an index token once the name's tokens are removed."""
    return [w for w in words if set(tokenize(w)) - banned]


def _sample(words: list[str], keep: float, at_most: int, rng: np.random.Generator) -> list[str]:
    if not words:
        return []
    mask = rng.random(len(words)) < keep
    if not mask.any():
        mask[rng.integers(len(words))] = True
    return [w for w, m in zip(words, mask) if m][:at_most]


def _module(path: str) -> str:
    return path[:-3].replace("/__init__", "").replace("/", ".")


def eligible(units: pd.DataFrame, min_words: int) -> pd.DataFrame:
    """Functions/methods with at least ``min_words`` docstring words or identifiers after masking."""
    ok = []
    for r in units.itertuples(index=False):
        banned = set(split_identifier(r.qualname.split(".")[-1]))
        doc = _content(_doc_words(r.docstring), banned)
        idents = _content(list(r.identifiers), banned | set(r.args))
        ok.append(len(doc) >= min_words or len(idents) >= min_words)
    return units[np.asarray(ok, dtype=bool)] if len(units) else units


def issue_text(target, callers: list[str], style: str, keep: float, max_words: int, mention: float,
               rng: np.random.Generator) -> tuple[str, str, str, list[str]]:
    """(style used, main query, prefixed query, copied tokens) of one synthetic issue about ``target``
    (a node-table row), name masked; the main query has its location masked too.

    A ``caller`` issue needs a caller and an ``error`` issue a raised message; without them the
    issue is written in the ``behaviour`` style."""
    name = target.qualname.split(".")[-1]
    banned = set(split_identifier(name))
    doc = _content(_doc_words(target.docstring), banned)
    idents = [w for w in dict.fromkeys(" ".join(split_identifier(i)) for i in target.identifiers)
              if w and set(tokenize(w)) - banned - set(target.args)]
    what = _sample(doc, keep, max_words, rng) if doc else _sample(idents, keep, max_words, rng)
    about = " ".join(what)
    opening = OPENINGS[rng.integers(len(OPENINGS))]
    symptom = SYMPTOMS[rng.integers(len(SYMPTOMS))]
    if style == "caller" and callers:
        caller = callers[rng.integers(len(callers))]
        path, qual = caller.split(":", 1)
        text = f"Calling {_module(path)}.{qual}() {symptom}. The fault seems to be in a step it relies on that {about}."
    elif style == "error" and list(target.messages):
        msg = list(target.messages)[rng.integers(len(target.messages))]
        text = f'I get the error "{msg}" and the code {symptom}. It happens where the library {about}.'
    else:
        style, text = "behaviour", f"{opening} {about}: it {symptom}."
    prefixed = text
    if rng.random() < mention:  # where the reporter saw it: the module, or module.Class of a method
        where = _module(target.path) + (f".{target.parent}" if target.parent else "")
        prefixed = f"In {where}: {text}"
    main = mask_location(mask_words(text, name), target.path, target.parent or None)
    return style, main, mask_words(prefixed, name), sorted(set(tokenize(mask_words(about, name))))


def synthetic_tasks(nodes: pd.DataFrame, edges: pd.DataFrame, repo: str, n: int, styles: list[str],
                    keep: float, max_words: int, min_words: int, mention: float, copied_kept: float,
                    rng: np.random.Generator) -> pd.DataFrame:
    """``n`` tasks (fewer if fewer functions are eligible) about distinct functions of ``repo``."""
    units = nodes[(nodes.repo == repo) & nodes.kind.isin(["function", "method"])].sort_values("id")
    pool = eligible(units, min_words)
    if pool.empty:
        return pd.DataFrame(columns=TASK_COLUMNS)
    inv = edges[(edges.repo == repo) & (edges.type == "invokes")]
    callers = inv.groupby("dst")["src"].apply(sorted).to_dict()
    chosen = pool.iloc[np.sort(rng.choice(len(pool), size=min(n, len(pool)), replace=False))]
    rows = []
    for i, t in enumerate(chosen.itertuples(index=False)):
        cs = [c for c in callers.get(t.id, []) if c.split(":", 1)[1] != t.qualname]
        usable = [s for s in styles if s == "behaviour" or (s == "caller" and cs) or (s == "error" and len(t.messages))]
        style = usable[rng.integers(len(usable))] if usable else "behaviour"
        used, query, prefixed, copied = issue_text(t, cs, style, keep, max_words, mention, rng)
        removed = [w for w in copied if rng.random() >= copied_kept]
        rows.append({"task": f"{repo}#{i}", "repo": repo, "gold": t.id, "gold_file": t.path, "template": used,
                     "query": query, "query_prefixed": prefixed, "removed": removed})
    return with_leak_columns(pd.DataFrame(rows, columns=TASK_COLUMNS[:-4]), nodes[nodes.repo == repo])
