"""One tokenizer for every index and every query, so that no method gets a better one.

Code and prose are both cut into lower-case word tokens: identifiers are split at underscores,
digits and camel-case humps (``getPayload_v2`` -> ``get payload``), tokens of one character,
numbers and English or Python boiler-plate words (``the``, ``self``, ``return``) are dropped.
"""

from __future__ import annotations

import functools
import keyword
import re

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# English function words only (articles, pronouns, prepositions, auxiliaries): larger lists such
# as scikit-learn's also drop words that carry meaning in code ("get", "find", "name", "system").
FUNCTION_WORDS = frozenset("""
a an the and or nor but if then else when while of to in on at by for from with without into onto
upon over under about above below between through during before after as than so such that this
these those there here it its is are was were be been being am do does did done has have had having
can could may might must shall should will would not no yes all any both each few more most other
some own same too very just only also again once we you he she they them their our your his her him
me my i us who whom whose which what where why how
""".split())
CODE_NOISE = frozenset({"self", "cls", "args", "kwargs", "none", "true", "false", "str", "int", "def",
                        "return", "isinstance", "len", "obj", "param", "returns", "rtype", "type"})
STOPWORDS = FUNCTION_WORDS | frozenset(k.lower() for k in keyword.kwlist) | CODE_NOISE


def split_identifier(name: str) -> list[str]:
    """``_parse_headerValue2`` -> ``['parse', 'header', 'value']`` (lower case, no digits)."""
    out = []
    for part in re.split(r"[^A-Za-z0-9]+", name):
        out.extend(h.lower() for h in _HUMP.findall(part) if not h.isdigit())
    return out


@functools.lru_cache(maxsize=1 << 18)
def _word_tokens(word: str) -> tuple[str, ...]:
    return tuple(t for t in split_identifier(word) if len(t) > 1 and t not in STOPWORDS)


def tokenize(text: str) -> list[str]:
    """Word tokens of code or prose, identifiers split, stopwords and one-letter tokens dropped."""
    toks: list[str] = []
    for word in _WORD.findall(text):
        toks.extend(_word_tokens(word))
    return toks


def name_tokens(name: str) -> set[str]:
    """The tokens an identifier contributes to an index: what masking a name must remove."""
    return set(tokenize(name))


def first_sentence(doc: str | None, max_words: int) -> str:
    """The first sentence (or first paragraph line) of a docstring, cut to ``max_words`` words."""
    if not doc:
        return ""
    para = doc.strip().split("\n\n", 1)[0].replace("\n", " ")
    sentence = re.split(r"(?<=[.!?])\s", para, maxsplit=1)[0]
    return " ".join(sentence.split()[:max_words])
