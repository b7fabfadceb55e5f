"""Synthetic multilingual parallel data: phrases of a synthetic lexicon, redrawn per seed.

A concept is an ordered phrase of ``phrase_len`` atoms (meanings) drawn from ``n_atoms``. Every language
(English, the pivot, included) has its own script (a block of ``n_syllables`` syllable tokens that no other
language uses), a lexicon that writes each atom as a word of two syllables (a pair no other atom of that
language uses, while every single syllable is shared by many words: a word's meaning is a conjunction of
two tokens), and a word order (a permutation of the phrase's slots; English keeps the order). So a query
(the phrase in one language) and its target (the phrase in English) share no token: they relate through
meaning only, and an untrained encoder retrieves at chance.

Concepts come in order twins (the same atoms in two orders), so retrieval needs the word order, not only the
bag of words. Twins are split together into train / val / test concepts; test and val concepts are never
trained on. A language's resource level is the amount of its training data: ``high`` languages have every
training concept, ``low`` languages a ``low_fraction`` share of them. The groups are drawn alike otherwise
(scripts, lexicons, word orders, test concepts), so no group is easier on surface overlap. No language is held
out of training: a language whose lexicon was never seen is at chance by construction.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pandas as pd

from icmlrepro.core.io import write_json, write_parquet
from icmlrepro.core.seeding import derive_seed

PIVOT = "en"
PAD = 0


def language_codes(s: dict) -> list[tuple[str, str]]:
    """(code, resource group) of every non-pivot language, high first."""
    out = [(f"h{i:02d}", "high") for i in range(s["n_high"])]
    return out + [(f"l{i:02d}", "low") for i in range(s["n_low"])]


def vocab_size(s: dict) -> int:
    """Pad + one script of ``n_syllables`` tokens per language (the pivot included)."""
    return 1 + (1 + s["n_high"] + s["n_low"]) * s["n_syllables"]


def make_world(s: dict, seed: int) -> dict:
    """Scripts, lexicons and word orders of every language, and the concepts with their split."""
    rng = np.random.default_rng(derive_seed(seed, "mlembed", "world"))
    langs = [(PIVOT, "pivot")] + language_codes(s)
    n_syl, n_atoms, k = s["n_syllables"], s["n_atoms"], s["phrase_len"]
    if n_syl * n_syl < n_atoms:
        raise ValueError("n_syllables**2 must be >= n_atoms (one syllable pair per atom)")
    orders = [p for p in permutations(range(k)) if list(p) != list(range(k))]
    world = {"langs": langs, "lexicon": {}, "order": {}}
    for j, (code, _) in enumerate(langs):
        base = 1 + j * n_syl  # this language's script: token ids base .. base + n_syl - 1
        pairs = rng.choice(n_syl * n_syl, size=n_atoms, replace=False)
        world["lexicon"][code] = np.stack([base + pairs // n_syl, base + pairs % n_syl], 1)  # atom -> 2 tokens
        world["order"][code] = list(range(k)) if code == PIVOT else list(orders[rng.integers(len(orders))])
    # concepts: order twins of distinct atom sets
    n_sets = s["n_concept_sets"]
    sets, seen = [], set()
    while len(sets) < n_sets:
        a = tuple(sorted(rng.choice(n_atoms, size=k, replace=False).tolist()))
        if a not in seen:
            seen.add(a)
            sets.append(a)
    rows = []
    split_of_set = rng.permutation(np.repeat(["test", "val", "train"], [s["n_test_sets"], s["n_val_sets"],
                                                                        n_sets - s["n_test_sets"] - s["n_val_sets"]]))
    for i, a in enumerate(sets):
        two = [list(p) for p in permutations(a)]
        pick = rng.choice(len(two), size=2, replace=False)
        for t in pick:
            rows.append({"concept": len(rows), "set": i, "atoms": two[t], "split": str(split_of_set[i])})
    world["concepts"] = pd.DataFrame(rows)
    return world


def render(world: dict, lang: str, atoms) -> list[int]:
    """Token ids of a phrase (atoms in English slot order) written in ``lang``: its word order, its words."""
    lex, order = world["lexicon"][lang], world["order"][lang]
    return [int(t) for slot in order for t in lex[atoms[slot]]]


def build_tables(s: dict, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(pairs, languages, concepts) of one seed: every (language, concept) query with its split."""
    world = make_world(s, seed)
    rng = np.random.default_rng(derive_seed(seed, "mlembed", "resource"))
    con = world["concepts"].copy()
    con["ids"] = [render(world, PIVOT, a) for a in con["atoms"]]
    train_c = con.loc[con["split"] == "train", "concept"].to_numpy()
    rows, lang_rows = [], []
    for code, group in world["langs"][1:]:
        if group == "high":
            have = set(train_c.tolist())
        else:
            have = set(rng.choice(train_c, size=max(1, round(s["low_fraction"] * len(train_c))), replace=False).tolist())
        for c in con.itertuples(index=False):
            if c.split == "train" and c.concept not in have:
                continue
            rows.append({"seed": seed, "lang": code, "resource": group, "concept": int(c.concept), "split": c.split,
                         "ids": render(world, code, c.atoms)})
        lang_rows.append({"seed": seed, "lang": code, "resource": group, "n_train_pairs": len(have),
                          "order": world["order"][code], "lexicon": world["lexicon"][code].tolist()})
    lang_rows.insert(0, {"seed": seed, "lang": PIVOT, "resource": "pivot", "n_train_pairs": 0,
                         "order": world["order"][PIVOT], "lexicon": world["lexicon"][PIVOT].tolist()})
    con.insert(0, "seed", seed)
    return pd.DataFrame(rows), pd.DataFrame(lang_rows), con


def run(job) -> None:
    s = job.params
    parts = [build_tables(s, seed) for seed in s["seeds"]]
    pairs, langs, concepts = (pd.concat([p[i] for p in parts], ignore_index=True) for i in range(3))
    write_parquet(job.output.pairs, pairs)
    write_parquet(job.output.languages, langs)
    write_parquet(job.output.concepts, concepts)
    write_json(job.output.summary, {
        "vocab_size": vocab_size(s), "n_pairs_per_seed": int(len(pairs) / len(s["seeds"])),
        "by_split_per_seed": (pairs[pairs["seed"] == s["seeds"][0]]["split"].value_counts().to_dict()),
        "train_pairs_by_group": langs[langs["seed"] == s["seeds"][0]].groupby("resource")["n_train_pairs"].sum().to_dict()})
