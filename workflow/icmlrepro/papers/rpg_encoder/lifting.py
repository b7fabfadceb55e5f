"""Semantic lifting without an LLM: a short feature phrase per unit and a summary per file.

The paper asks an LLM for a feature phrase per function/class ("parse version string") and a
summary per file. Here the phrase is read off the code: the unit's name split into words plus
the first sentence of its docstring; a unit without a docstring is described by its name, its
parameters and what it calls (identifier words), so every unit gets a feature. A file summary
is the module docstring's first sentence plus the most frequent words of its units' features.

Every call is counted by :class:`Lifter`: a unit lifted, a file summarised, a file placed in the
hierarchy. These counts stand in for the LLM calls whose number the paper's incremental
evolution reduces; they are what the maintenance cost compares.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .code_units import Unit
from .text import first_sentence, split_identifier, tokenize


def _words(names: list[str], limit: int) -> str:
    out: list[str] = []
    for n in names:
        for w in split_identifier(n.split(".")[-1]):
            if len(w) > 1 and w not in out:
                out.append(w)
    return " ".join(out[:limit])


def unit_feature(unit: Unit, max_words: int) -> str:
    """The feature phrase of one unit: name words, then docstring gist or code-derived words."""
    name = " ".join(split_identifier(unit.name)) or unit.name
    gist = first_sentence(unit.docstring, max_words)
    if gist:
        return f"{name}: {gist}"
    if unit.kind == "class":
        detail = _words(unit.bases + unit.methods, max_words)
        return f"{name} (based on/with: {detail})" if detail else name
    detail = _words(unit.args, max_words // 2)
    uses = _words(unit.calls, max_words - len(detail.split()))
    parts = [p for p in (f"with {detail}" if detail else "", f"using {uses}" if uses else "") if p]
    return f"{name} ({'; '.join(parts)})" if parts else name


def file_summary(path: str, module_doc: str, features: list[str], max_words: int, n_terms: int) -> str:
    """Module docstring gist plus the ``n_terms`` most frequent words of the file's unit features."""
    counts = Counter(t for f in features for t in tokenize(f))
    top = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n_terms]]
    module = " ".join(split_identifier(path[:-3].replace("/__init__", "")))
    gist = first_sentence(module_doc, max_words)
    return f"{module}: {gist} [{' '.join(top)}]" if gist else f"{module} [{' '.join(top)}]"


@dataclass
class Lifter:
    """LLM-free lifting with a ledger of calls (the stand-in for LLM cost)."""

    max_words: int = 16
    summary_terms: int = 8
    calls: Counter = field(default_factory=Counter)

    def lift(self, unit: Unit) -> str:
        self.calls["unit"] += 1
        return unit_feature(unit, self.max_words)

    def summarize(self, path: str, module_doc: str, features: list[str]) -> str:
        self.calls["file_summary"] += 1
        return file_summary(path, module_doc, features, self.max_words, self.summary_terms)

    def placed(self, n: int = 1) -> None:
        """Count ``n`` files placed among the functional areas (one LLM decision each in the paper)."""
        self.calls["placement"] += n

    @property
    def total(self) -> int:
        return int(sum(self.calls.values()))
