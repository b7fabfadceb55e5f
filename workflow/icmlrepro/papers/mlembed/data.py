"""Real multilingual parallel data that ships inside babel: CLDR display names.

A concept is a territory, a language, a script, a month or a weekday; its name in a locale is the query
and its English name the target (cross-lingual retrieval to English). Pairs whose query equals the
English name (loanwords, untranslated entries) are dropped, so no query contains its answer. A
language's resource level is how many names CLDR holds for it here: the top half of the selected
languages is ``high``, the bottom half ``low``. Every ``heldout_every``-th language (by that count) is
held out of training entirely (its text is not in the tokenizer's corpus either), and a share of the
concepts is kept for testing only, so evaluation measures transfer, not memorised pairs.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
from babel import Locale, localedata

from icmlrepro.core.io import write_json, write_parquet, write_tokenizer

PIVOT = "en"
TYPES = ("territory", "language", "script", "calendar")


def _norm(s: str) -> str:
    return " ".join(str(s).casefold().split())


def concept_names(locale: str) -> dict[str, str]:
    """Concept id -> display name in ``locale`` (CLDR via babel; nothing is downloaded)."""
    loc = Locale.parse(locale)
    out = {f"territory:{k}": v for k, v in loc.territories.items() if len(k) == 2 and k.isalpha()}
    out.update({f"language:{k}": v for k, v in loc.languages.items() if "_" not in k and k.isalpha()})
    out.update({f"script:{k}": v for k, v in loc.scripts.items()})
    out.update({f"calendar:month{k}": v for k, v in loc.months["format"]["wide"].items()})
    out.update({f"calendar:day{k}": v for k, v in loc.days["format"]["wide"].items()})
    return {k: v for k, v in out.items() if v}


def _stable_unit(key: str) -> float:
    """A number in [0, 1) fixed by the key alone (split decisions that do not depend on set order)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12


def build_tables(s: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(pairs, languages, concepts): every (language, concept) pair with its split and group."""
    english = concept_names(PIVOT)
    by_type = {t: sorted(c for c in english if c.startswith(t + ":")) for t in TYPES}
    concepts = [c for t in TYPES for c in by_type[t]
                if _stable_unit("mlembed-cap:" + c) < s["max_concepts_per_type"] / max(len(by_type[t]), 1)]
    test = {c for c in concepts if _stable_unit("mlembed-test:" + c) < s["test_concept_fraction"]}
    counts = {}
    for loc in sorted(i for i in localedata.locale_identifiers() if "_" not in i and i != PIVOT):
        names = concept_names(loc)
        counts[loc] = sum(1 for c in english if c in names and _norm(names[c]) != _norm(english[c]))
    eligible = sorted((loc for loc, n in counts.items() if n >= s["min_names"]), key=lambda x: (-counts[x], x))
    pick = np.unique(np.linspace(0, len(eligible) - 1, s["n_languages"]).round().astype(int))
    langs = [eligible[i] for i in pick]  # evenly spread over the resource range, most names first
    half = len(langs) // 2
    lang_df = pd.DataFrame({
        "lang": langs, "n_names": [counts[x] for x in langs],
        "resource": ["high" if i < half else "low" for i in range(len(langs))],
        "heldout": [(i % s["heldout_every"]) == s["heldout_every"] - 1 for i in range(len(langs))],
    })
    rows = []
    for r in lang_df.itertuples(index=False):
        names = concept_names(r.lang)
        for c in concepts:
            if c in names and _norm(names[c]) != _norm(english[c]):
                rows.append({"lang": r.lang, "concept": c, "text": names[c], "target": english[c],
                             "resource": r.resource, "heldout": r.heldout, "test_concept": c in test})
    pairs = pd.DataFrame(rows)
    pairs["split"] = np.where(pairs["heldout"] | pairs["test_concept"], "eval", "train")
    pairs.loc[pairs["heldout"] & ~pairs["test_concept"], "split"] = "unused"  # held-out language, train concept
    concept_df = pd.DataFrame({"concept": concepts, "type": [c.split(":")[0] for c in concepts],
                               "target": [english[c] for c in concepts], "test": [c in test for c in concepts]})
    return pairs, lang_df, concept_df


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained with ``tokenizers`` on the training text only (byte-level, so an
    unseen script of a held-out language still encodes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def training_texts(pairs: pd.DataFrame, concepts: pd.DataFrame) -> list[str]:
    """Everything the tokenizer may see: training queries and the English names of training concepts."""
    tr = pairs[pairs["split"] == "train"]
    return sorted(set(tr["text"]) | set(concepts.loc[~concepts["test"], "target"]))


def run(job) -> None:
    s = job.params
    pairs, langs, concepts = build_tables(s)
    tok = train_tokenizer(training_texts(pairs, concepts), s["vocab_size"])
    write_parquet(job.output.pairs, pairs)
    write_parquet(job.output.languages, langs)
    write_parquet(job.output.concepts, concepts)
    write_tokenizer(job.output.tokenizer, tok)
    write_json(job.output.summary, {"n_pairs": len(pairs), "by_split": pairs["split"].value_counts().to_dict(),
                                    "languages": langs.to_dict(orient="list")})
