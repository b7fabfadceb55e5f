"""What a localization query must not give away, measured and masked.

* The *location*: the gold file's stem (``message`` for ``email/message.py``, the package name for
  an ``__init__.py``) or, for a method, its class. Every index sees these words (paths and
  qualified names are indexed, file summaries start with the module name, anchoring keys on
  ``module.Class``), so a query that keeps them is answered by the file name, not by its
  description. A query *leaks* when the word tokens of the stem (or class) occur in it as a
  contiguous run of its tokens; :func:`mask_location` masks every word that shares a token with
  them, after which no leak is left (a unit test holds it to that).
* *Copied words*: a synthetic issue samples its description from the gold unit's own docstring
  or identifiers, so those words sit verbatim in the unit's indexed text. :func:`overlap` is the
  share of a query's distinct tokens found in a unit's indexed tokens; the localization stage
  removes the sampled words from the gold unit's own indexed text (:mod:`.navigation`).
"""

from __future__ import annotations

import re

from .news import MASK
from .text import split_identifier, tokenize

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def file_stem(path: str) -> str:
    """``email/message.py`` -> ``message``; ``json/__init__.py`` -> ``json``."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    return parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]


def location_names(gold_file: str, parent: str | None) -> list[str]:
    """The names that locate the gold unit: its file's stem and, for a method, its class."""
    return [n for n in (file_stem(gold_file), parent or "") if n]


def _runs(tokens: list[str], run: list[str]) -> bool:
    k = len(run)
    return bool(k) and any(tokens[i:i + k] == run for i in range(len(tokens) - k + 1))


def location_leak(query: str, gold_file: str, parent: str | None) -> bool:
    """True when the query contains the word tokens of the gold file's stem or class, in order."""
    tokens = [t for w in _WORD.findall(query) for t in split_identifier(w)]
    return any(_runs(tokens, split_identifier(n)) for n in location_names(gold_file, parent))


def mask_location(query: str, gold_file: str, parent: str | None) -> str:
    """The query with every word that shares a word token with the stem or class masked."""
    banned = {t for n in location_names(gold_file, parent) for t in split_identifier(n)}
    if not banned:
        return query
    return _WORD.sub(lambda m: MASK if banned & set(split_identifier(m.group(0))) else m.group(0), query)


def overlap(query: str, indexed: list[str] | set[str], ignore: frozenset = frozenset()) -> float:
    """Share of the query's distinct index tokens (less ``ignore``: the issue template's own words)
    that occur in ``indexed`` (NaN when none is left)."""
    q = set(tokenize(query)) - ignore
    return len(q & set(indexed)) / len(q) if q else float("nan")
