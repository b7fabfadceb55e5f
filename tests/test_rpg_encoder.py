"""RPG-Encoder: the graph of a hand-written package, incremental evolution, masking, BM25, coverage."""

import ast
import dataclasses
import math
import textwrap

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from icmlrepro.papers.rpg_encoder import encoder as E
from icmlrepro.papers.rpg_encoder.bm25 import BM25
from icmlrepro.papers.rpg_encoder.changelog_tasks import Resolver, changelog_tasks
from icmlrepro.papers.rpg_encoder.code_units import parse_file
from icmlrepro.papers.rpg_encoder.evolution import hierarchy_agreement, replay, simulate_commit
from icmlrepro.papers.rpg_encoder.reconstruction import reconstruction_table, stub_entities, stub_source
from icmlrepro.papers.rpg_encoder.signatures import from_ast, from_runtime, parameter_names
from icmlrepro.papers.rpg_encoder.inventory import module_entities
from icmlrepro.papers.rpg_encoder.lifting import Lifter
from icmlrepro.papers.rpg_encoder.navigation import RepoIndex, check_equal_budget, expand, localize, neighbour_max
from icmlrepro.papers.rpg_encoder.news import Entry, mask_reference, parse_entries
from icmlrepro.papers.rpg_encoder.leaks import file_stem, location_leak, mask_location, overlap
from icmlrepro.papers.rpg_encoder.synthetic_issues import TEMPLATE_TOKENS, synthetic_tasks, with_leak_columns
from icmlrepro.papers.rpg_encoder.text import split_identifier, tokenize

from .conftest import check_smoke_paper


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


PKG = {
    "pkg/__init__.py": src('''
        """Tiny package."""
        from .core import Engine
        from .util import helper as h
        '''),
    "pkg/util.py": src('''
        """Small helpers."""


        def helper(x):
            """Double a number."""
            return x * 2


        def _unused():
            pass
        '''),
    "pkg/core.py": src('''
        """The engine."""
        from . import util
        from .util import helper


        class Base:
            """Base engine."""

            def run(self):
                return self.step()

            def step(self):
                return 1


        class Engine(Base):
            def step(self):
                return helper(super().step())

            def go(self):
                return util.helper(self.run())


        def make():
            return Engine()
        '''),
}
SETTINGS = E.Settings(area_size=2, sub_size=1, seed=0)


# --- encoding ------------------------------------------------------------------------------------
def test_tiny_package_gives_exactly_the_expected_nodes_and_edges():
    rpg = E.encode("pkg", PKG, SETTINGS)
    nodes = E.node_table(rpg)
    units = nodes[nodes.kind.isin(["class", "function", "method"])]
    assert dict(zip(units.id, units.kind)) == {
        "pkg/util.py:helper": "function", "pkg/util.py:_unused": "function",
        "pkg/core.py:Base": "class", "pkg/core.py:Base.run": "method", "pkg/core.py:Base.step": "method",
        "pkg/core.py:Engine": "class", "pkg/core.py:Engine.step": "method", "pkg/core.py:Engine.go": "method",
        "pkg/core.py:make": "function"}
    assert set(nodes[nodes.kind == "file"].id) == set(PKG)
    assert set(nodes[nodes.kind == "directory"].id) == {"dir:.", "dir:pkg"}
    edges = set(map(tuple, E.edge_table(rpg)[["src", "dst", "type"]].to_numpy()))
    by_type = lambda t: {(s, d) for s, d, k in edges if k == t}  # noqa: E731
    assert by_type("imports") == {("pkg/__init__.py", "pkg/core.py"), ("pkg/__init__.py", "pkg/util.py"),
                                  ("pkg/core.py", "pkg/util.py")}
    assert by_type("inherits") == {("pkg/core.py:Engine", "pkg/core.py:Base")}
    assert by_type("invokes") == {
        ("pkg/core.py:Base.run", "pkg/core.py:Base.step"),      # self.step()
        ("pkg/core.py:Engine.step", "pkg/util.py:helper"),      # imported name
        ("pkg/core.py:Engine.step", "pkg/core.py:Base.step"),   # super().step()
        ("pkg/core.py:Engine.go", "pkg/util.py:helper"),        # module attribute
        ("pkg/core.py:Engine.go", "pkg/core.py:Base.run"),      # self.run() through the base class
        ("pkg/core.py:make", "pkg/core.py:Engine"),             # constructor call
    }
    assert by_type("contains") == {
        ("dir:.", "dir:pkg"), ("dir:pkg", "pkg/__init__.py"), ("dir:pkg", "pkg/core.py"), ("dir:pkg", "pkg/util.py"),
        ("pkg/util.py", "pkg/util.py:helper"), ("pkg/util.py", "pkg/util.py:_unused"),
        ("pkg/core.py", "pkg/core.py:Base"), ("pkg/core.py", "pkg/core.py:Engine"), ("pkg/core.py", "pkg/core.py:make"),
        ("pkg/core.py:Base", "pkg/core.py:Base.run"), ("pkg/core.py:Base", "pkg/core.py:Base.step"),
        ("pkg/core.py:Engine", "pkg/core.py:Engine.step"), ("pkg/core.py:Engine", "pkg/core.py:Engine.go")}
    composes = by_type("composes")
    files_placed = {d for s, d in composes if d in PKG}
    assert files_placed == set(PKG)  # every file sits under one sub-area, every sub-area under an area
    assert all(s.startswith("area") for s, _ in composes)


def test_structure_is_one_containment_tree_and_a_forest_of_areas():
    rpg = E.encode("pkg", PKG, SETTINGS)
    nodes, edges = E.node_table(rpg), E.edge_table(rpg)
    counts = E.structure(nodes, edges)
    assert counts["nodes_method"] == 4 and counts["edges_inherits"] == 1
    assert counts["dependency_components"] == 3  # files by imports; make-Engine-Base; the methods and helper
    broken = edges[~((edges.type == "contains") & (edges.dst == "pkg/core.py:make"))]
    with pytest.raises(ValueError, match="contains"):
        E.structure(nodes, broken)


def test_lifting_reads_docstring_or_code_and_counts_every_call():
    lifter = Lifter()
    rpg = E.encode("pkg", PKG, SETTINGS, lifter)
    assert rpg.features["pkg/util.py:helper"] == "helper: Double a number."
    assert rpg.features["pkg/core.py:Engine.go"].startswith("go (using")  # no docstring: what it calls
    assert all(rpg.features.values())  # every unit gets a feature
    assert lifter.calls == {"unit": 9, "file_summary": 3, "placement": 3}


def test_star_import_and_package_reexport_are_followed():
    tree = {"p/__init__.py": "from .a import *\n", "p/a.py": "def f():\n    return 1\n",
            "p/b.py": "import p\nfrom p import f as g\n\ndef u():\n    return p.f() + g()\n"}
    edges = set(map(tuple, E.edge_table(E.encode("p", tree, SETTINGS))[["src", "dst", "type"]].to_numpy()))
    assert ("p/b.py:u", "p/a.py:f", "invokes") in edges
    assert ("p/__init__.py", "p/a.py", "imports") in edges


# --- change detection and incremental evolution --------------------------------------------------
def unit(code: str, name: str):
    return next(u for u in parse_file("m.py", src(code)).units if u.qualname == name)


def test_fingerprint_ignores_layout_and_own_docstring_but_not_code():
    base = unit('def f(x):\n    """Doc."""\n    return x + 1\n', "f").fingerprint
    assert unit('\n\n\ndef f(x):\n    """Other doc."""\n    return (x + 1)\n', "f").fingerprint == base
    assert unit('def f(x):\n    """Doc."""\n    return x + 2\n', "f").fingerprint != base
    cls = 'class C:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n'
    swapped = 'class C:\n    def b(self):\n        return 2\n\n    def a(self):\n        return 1\n'
    changed = 'class C:\n    def a(self):\n        return 3\n\n    def b(self):\n        return 2\n'
    assert unit(cls, "C").fingerprint == unit(swapped, "C").fingerprint  # class body sorted, as published
    assert unit(cls, "C").fingerprint != unit(changed, "C").fingerprint  # a method edit changes its class
    assert unit(cls, "C.b").fingerprint == unit(changed, "C.b").fingerprint


NEW = dict(PKG)
NEW["pkg/core.py"] = PKG["pkg/core.py"].replace("return util.helper(self.run())", "return util.helper(self.run()) + 1")
NEW["pkg/util.py"] = PKG["pkg/util.py"].replace("Double a number.", "Twice a number.").replace(
    "\n\ndef _unused():\n    pass\n", "")
NEW["pkg/extra.py"] = '"""Extras."""\nfrom .util import helper\n\n\ndef extra(y):\n    return helper(y)\n'


def test_incremental_update_relifts_exactly_the_changed_units():
    old = E.encode("pkg", PKG, SETTINGS)
    lifter = Lifter()
    new, d = E.update(old, NEW, SETTINGS, lifter)
    assert d.added_files == ["pkg/extra.py"] and d.deleted_files == []
    assert d.modified == {"pkg/core.py": {"added": [], "changed": ["pkg/core.py:Engine", "pkg/core.py:Engine.go"],
                                          "deleted": []},
                          "pkg/util.py": {"added": [], "changed": [], "deleted": ["pkg/util.py:_unused"]}}
    assert lifter.calls["unit"] == 3  # Engine, Engine.go, extra; the docstring-only edit of helper is not re-lifted
    assert lifter.calls["file_summary"] == 3  # core.py, util.py, extra.py
    assert 1 <= lifter.calls["placement"] <= 3  # the new file, plus files whose summary changed


def test_incremental_graph_equals_full_rebuild_except_docstring_only_edits():
    kept, _ = E.update(E.encode("pkg", PKG, SETTINGS), NEW, SETTINGS)
    full = E.encode("pkg", NEW, SETTINGS)
    assert set(kept.features) == set(full.features)
    assert kept.edges == full.edges
    differ = {u for u in full.features if kept.features[u] != full.features[u]}
    assert differ == {"pkg/util.py:helper"}  # stale by the paper's rule: docstrings are ignored when diffing
    assert kept.features["pkg/util.py:helper"] == "helper: Double a number."


def test_replay_counts_zero_cost_for_an_unchanged_release():
    rows, kept, full = replay([("1", PKG), ("2", PKG), ("3", NEW)], SETTINGS)
    assert rows[0]["incremental_cost"] == 0 and rows[0]["full_cost"] == 9 + 3 + 3
    assert rows[1]["incremental_unit"] == 3 and rows[1]["full_unit"] == 9  # 8 old units - _unused + extra
    assert rows[1]["same_units"] == 1.0 and rows[1]["same_dependency_edges"] == 1.0


def test_simulated_commit_has_the_requested_size():
    rng = np.random.default_rng(3)
    new, done = simulate_commit(PKG, E.parse_tree(PKG), modify=2, add=1, delete=1, rng=rng, tag="t")
    assert done == {"modified": 2, "added": 1, "deleted": 1}
    d = E.diff(E.parse_tree(PKG), E.parse_tree(new))
    changed = [u for v in d.modified.values() for u in v["changed"] if u.split(":")[1] not in ("Base", "Engine")]
    assert len(changed) == 2  # the two edited functions/methods (their classes change with them)
    assert sum(len(v["added"]) for v in d.modified.values()) == 1
    assert sum(len(v["deleted"]) for v in d.modified.values()) == 1


# --- tasks: masking --------------------------------------------------------------------------------
def test_synthetic_issues_never_name_their_target():
    rpg = E.encode("pkg", PKG, SETTINGS)
    nodes, edges = E.node_table(rpg), E.edge_table(rpg)
    tasks = synthetic_tasks(nodes, edges, "pkg", 10, ["behaviour", "caller", "error"], 1.0, 20, 1, 1.0, 0.2,
                            np.random.default_rng(0))
    assert len(tasks) >= 4
    for t in tasks.itertuples():
        name = t.gold.split(":")[1].split(".")[-1]
        assert name not in t.query
        assert not set(tokenize(t.query)) & set(split_identifier(name)), (t.gold, t.query)


def test_main_queries_never_leak_the_location_and_a_planted_leak_is_caught():
    rpg = E.encode("pkg", PKG, SETTINGS)
    nodes, edges = E.node_table(rpg), E.edge_table(rpg)
    tasks = synthetic_tasks(nodes, edges, "pkg", 10, ["behaviour", "caller", "error"], 1.0, 20, 1, 1.0, 0.0,
                            np.random.default_rng(0))
    assert tasks.location_leak.all()  # mention = 1: every prefixed query says "In pkg.core.Engine: ..."
    assert not tasks.location_leak_main.any()
    for t in tasks.itertuples():
        stem = file_stem(t.gold_file)
        assert stem not in t.query.lower() and not location_leak(t.query, t.gold_file, None), t.query
    # a leak planted in an otherwise clean main query is caught, and masking removes it again
    planted = tasks.assign(query_prefixed=tasks["query"] + " (seen in the core module)")
    caught = with_leak_columns(planted, nodes)
    assert caught.location_leak[tasks.gold_file == "pkg/core.py"].all()
    assert not caught.location_leak[tasks.gold_file != "pkg/core.py"].any()  # util.py tasks: "core" is not theirs
    assert not location_leak(mask_location("parse the Engine state in pkg.core", "pkg/core.py", "Engine"),
                             "pkg/core.py", "Engine")
    assert location_leak("calls getEngine()", "pkg/core.py", "Engine")  # a token inside an identifier counts
    assert file_stem("pkg/__init__.py") == "pkg" and file_stem("email/message.py") == "message"


def test_removed_description_words_leave_the_overlap_of_kept_ones():
    rpg = E.encode("pkg", PKG, SETTINGS)
    nodes, edges = E.node_table(rpg), E.edge_table(rpg)
    every = synthetic_tasks(nodes, edges, "pkg", 10, ["behaviour"], 1.0, 20, 1, 0.0, 0.0, np.random.default_rng(1))
    # (NaN: a query whose only content word is also a template word, "step")
    assert every.overlap_indexed.notna().sum() >= 4
    assert (every.overlap_indexed.dropna() == 1.0).all()  # behaviour issues are made of the unit's own words
    assert (every.overlap_after.dropna() == 0.0).all()  # all removed from its indexed text
    kept = synthetic_tasks(nodes, edges, "pkg", 10, ["behaviour"], 1.0, 20, 1, 0.0, 1.0, np.random.default_rng(1))
    assert (kept.overlap_after.dropna() == 1.0).all() and not any(len(r) for r in kept.removed)
    assert overlap("Regression in the routine that doubles", {"doubles"}, TEMPLATE_TOKENS) == 1.0


def test_changelog_entry_is_parsed_and_its_target_masked():
    text = src('''
        Library
        -------

        - gh-issue-1: Fix :meth:`email.message.Message.get_payload` to decode the
          payload properly; get_payload() was wrong.

        - bpo-2: Document :func:`json.dumps`.
        ''')
    entries = parse_entries(text)
    assert [(e.issue, e.section) for e in entries] == [("gh-issue-1", "Library"), ("bpo-2", "Library")]
    assert entries[0].references() == ["email.message.Message.get_payload"]
    masked = mask_reference(entries[0].text, "email.message.Message.get_payload", "get_payload")
    assert "email.message.Message.___" in masked
    assert "payload" not in masked.lower() and "get" not in tokenize(masked)


def test_changelog_references_resolve_through_reexports():
    resolver = Resolver(["json/__init__.py:dumps", "asyncio/runners.py:run", "shutil.py:copy"])
    assert resolver.resolve("json.dumps") == "json/__init__.py:dumps"
    assert resolver.resolve("asyncio.run") == "asyncio/runners.py:run"  # re-exported by asyncio/__init__
    assert resolver.resolve("shutil.nonexistent") is None
    tasks = changelog_tasks([Entry("gh-9", "Library", "Make :func:`shutil.copy` faster.")],
                            ["shutil.py:copy"], ["Library"], "stdlib")
    assert tasks.gold.tolist() == ["shutil.py:copy"] and "copy" not in tasks["query"][0]


# --- retrieval ------------------------------------------------------------------------------------
def test_bm25_matches_a_hand_computed_case():
    bm = BM25([["a", "b"], ["a"], ["c"]], k1=1.2, b=0.75)
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    avgdl = 4 / 3
    expect0 = idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / avgdl))
    expect1 = idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 1 / avgdl))
    assert np.allclose(bm.scores(["a", "zzz"]), [expect0, expect1, 0.0])
    assert np.allclose(bm.scores(["a", "a"]), bm.scores(["a"]))  # each distinct query term once


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (0.5, 0.3), (2.0, 1.0)])
def test_bm25_matches_bm25s_lucene_on_a_random_corpus(k1, b):
    """The same scores as bm25s's Lucene BM25 (idf = ln(1 + (N - df + 0.5) / (df + 0.5))), every document, up
    to the constant factor k1 + 1 that Lucene (since 8.0) and bm25s leave out of the numerator: it changes no
    ranking, and the textbook Okapi form keeps it."""
    import bm25s

    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(40)]
    docs = [list(rng.choice(vocab, size=rng.integers(1, 30))) for _ in range(60)]
    ref = bm25s.BM25(method="lucene", k1=k1, b=b)
    ref.index(docs, show_progress=False)
    ours = BM25(docs, k1=k1, b=b)
    for _ in range(10):
        query = list(dict.fromkeys(rng.choice(vocab, size=4)))
        assert np.allclose(ours.scores(query), (k1 + 1) * ref.get_scores(query), rtol=1e-5, atol=1e-6)
    assert np.isclose(ours.score_doc(docs[3], query), ours.scores(query)[3])  # an indexed document scores alike


def test_removed_words_lower_only_the_gold_unit():
    rpg = E.encode("pkg", PKG, SETTINGS)
    idx = RepoIndex.build("pkg", E.node_table(rpg), E.edge_table(rpg))
    params, fixed = {"k1": 1.2, "b": 0.75}, {"k1": 1.2, "b": 0.75, "hops": 1, "decay": 0.5}
    query = "double a number twice"
    whole = idx.scores("bm25_code", params, fixed, query)
    cut = idx.scores("bm25_code", params, fixed, query, drop=("pkg/util.py:helper", ("double", "number")))
    gold = idx.position["pkg/util.py:helper"]
    assert whole[gold] > 0 and cut[gold] == 0.0  # nothing of the query is left in its own text
    assert np.array_equal(np.delete(whole, gold), np.delete(cut, gold))


def test_expansion_takes_the_best_neighbour_with_decay():
    adj = sparse.csr_matrix(np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]], dtype=float))
    s = np.array([0.0, 0.0, 1.0, 0.5])
    assert np.allclose(neighbour_max(adj, s), [0, 1, 0, 0])
    assert np.allclose(expand(s, adj, 0.5, 2, 0.5), s + 0.5 * np.array([0.5, 1.0, 0.5, 0.0]))


def test_tuning_budgets_must_be_equal():
    ok = {"bm25_code": {"k1": [1, 2]}, "dep_graph": {"hops": [1, 2]}, "rpg": {"feature_weight": [0.1, 0.2]}}
    assert check_equal_budget(ok) == 2
    with pytest.raises(ValueError, match="same size"):
        check_equal_budget({**ok, "rpg": {"feature_weight": [0.1, 0.2, 0.3]}})


def test_anchoring_restricts_to_the_named_class():
    rpg = E.encode("pkg", PKG, SETTINGS)
    idx = RepoIndex.build("pkg", E.node_table(rpg), E.edge_table(rpg))
    a = idx.anchor("In pkg.core.Base: something is off")
    assert set(idx.ids[a > 0]) == {"pkg/core.py:Base.run", "pkg/core.py:Base.step"}


def test_a_package_anchor_covers_the_units_of_its_modules():
    rpg = E.encode("pkg", PKG, SETTINGS)
    idx = RepoIndex.build("pkg", E.node_table(rpg), E.edge_table(rpg))
    a = idx.anchor("Fix pkg.___.___ so that it copes")  # file stem and name masked, the package kept
    assert set(idx.ids[a > 0]) == set(idx.ids)  # every unit of pkg/core.py and pkg/util.py


def test_ranking_stays_inside_the_gold_component():
    rpg = E.encode("pkg", PKG, SETTINGS)
    nodes, edges = E.node_table(rpg), E.edge_table(rpg)
    whole, cut = RepoIndex.build("pkg", nodes, edges), RepoIndex.build("pkg", nodes, edges, component_files=1)
    units, files = cut.candidates("pkg/util.py")  # files in path order: pkg/core.py | pkg/util.py
    assert set(cut.ids[units]) == {"pkg/util.py:helper", "pkg/util.py:_unused"} and list(cut.file_names[files]) == [
        "pkg/util.py"]
    assert len(whole.candidates("pkg/util.py")[0]) == len(whole.ids)
    s = np.zeros(len(whole.ids))
    s[whole.position["pkg/core.py:make"]], s[whole.position["pkg/util.py:helper"]] = 2.0, 1.0
    assert whole.ranks(s, "pkg/util.py:helper", "pkg/util.py") == (1, 1)
    assert cut.ranks(s, "pkg/util.py:helper", "pkg/util.py") == (0, 0)  # the decoy sits in another component
    tasks = pd.DataFrame({"task": ["t"], "repo": ["pkg"], "gold": ["pkg/util.py:helper"], "gold_file": ["pkg/util.py"],
                          "query": ["double a number"], "removed": [[]]})
    params = {"k1": 1.2, "b": 0.75}
    fixed = {**params, "hops": 1, "decay": 0.5}
    r = localize({"pkg": cut}, tasks, "bm25_code", params, fixed)
    assert (r.candidates.tolist(), r.candidate_files.tolist()) == ([2], [1])


def test_chance_is_five_over_the_units_of_the_task_component():
    from icmlrepro.papers.rpg_encoder.evaluate import task_table

    nodes = E.node_table(E.encode("pkg", PKG, SETTINGS))
    ranks = pd.DataFrame({"seed": 0, "method": "bm25_code", "taskset": "test", "variant": "main", "repo": "pkg",
                          "draws": 1, "location_leak": False, "location_leak_main": False, "overlap_indexed": 1.0,
                          "overlap_after": 0.5, "candidates": [10, 50], "candidate_files": [2, 10]})
    row = task_table(ranks, nodes).iloc[0]
    assert math.isclose(row.chance_function, (0.5 + 0.1) / 2) and math.isclose(row.chance_file, (1 + 0.5) / 2)
    whole = task_table(ranks.drop(columns=["candidates", "candidate_files"]), nodes).iloc[0]
    assert math.isclose(whole.chance_function, 5 / 7)  # without counts: the repository's 7 functions/methods


# --- coverage -------------------------------------------------------------------------------------
def test_coverage_counts_what_the_parser_misses_against_the_runtime_inventory(tmp_path, monkeypatch):
    code = src('''
        """Probe module."""
        import collections

        P = collections.namedtuple("P", "x y")


        class A:
            """Documented class."""

            class Inner:
                def f(self):
                    pass

            if True:
                def cond(self):
                    pass

            def m(self):
                """Documented method."""


        def g():
            pass
        ''')
    (tmp_path / "rpg_probe_mod.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    entities, err = module_entities("rpg_probe_mod", "rpg_probe_mod.py", code)
    assert err is None
    assert {e.qualname for e in entities} == {"A", "A.Inner", "A.Inner.f", "A.cond", "A.m", "g"}  # no namedtuple P
    inv = pd.DataFrame([{"repo": "r", **dataclasses.asdict(e)} for e in entities])
    nodes = E.node_table(E.encode("r", {"rpg_probe_mod.py": code}, SETTINGS))
    cov = reconstruction_table(inv, nodes).set_index("qualname")
    assert set(cov.index[cov.rpg]) == {"A", "A.m", "g"}  # the stubs miss the nested class and the conditional method
    assert set(cov.index[cov.docs]) == {"A", "A.m"}  # own docstrings (A.m has no parameter to name)


def test_reconstruction_fails_where_the_stub_differs_from_what_runs(tmp_path, monkeypatch):
    """Two definitions of one function: the RPG keeps the first (as the published parser does), the
    module runs the second."""
    code = src('''
        def f(a):
            """Use a."""


        def f(a, b=1, *rest, key, **kw):
            """Use a, b, rest, key and kw."""


        class K:
            def m(self, z=None):
                pass
        ''')
    (tmp_path / "rpg_probe_sig.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    entities, err = module_entities("rpg_probe_sig", "rpg_probe_sig.py", code)
    assert err is None
    sig = {e.qualname: e.signature for e in entities}
    assert sig["f"] == "(a, b=, *rest, key, **kw)" and sig["K.m"] == "(self, z=)"
    inv = pd.DataFrame([{"repo": "r", **dataclasses.asdict(e)} for e in entities])
    nodes = E.node_table(E.encode("r", {"rpg_probe_sig.py": code}, SETTINGS))
    cov = reconstruction_table(inv, nodes).set_index("qualname")
    assert cov.loc["f", "rpg_name"] and not cov.loc["f", "rpg"]  # the stub has f(a): wrong arity
    assert cov.loc["K.m", "rpg"] and cov.loc["K", "rpg"]
    assert cov.loc["f", "docs"] and not cov.loc["K.m", "docs"]  # undocumented method
    assert stub_entities(stub_source(nodes[nodes.kind.isin(["class", "function", "method"])]))["K.m"] == (
        "function", "(self, z=)")


@pytest.mark.parametrize("params", ["", "a", "a, b=2", "a, /, b, *, c, d=1", "*args, **kw", "a=1, /, *r, k=2, **kw",
                                    "self, x, *, y"])
def test_signature_is_the_same_from_the_ast_and_at_run_time(params):
    ns: dict = {}
    exec(f"def f({params}): pass", ns)
    assert from_ast(ast.parse(f"def f({params}): pass").body[0].args) == from_runtime(ns["f"])
    assert parameter_names(from_runtime(ns["f"])) == [p.split("=")[0].strip(" */") for p in params.split(",")
                                                       if p.strip() not in ("", "/", "*")]


# --- claims: controls -----------------------------------------------------------------------------
def test_every_claim_names_a_control_or_says_why_not_and_no_control_reproduces_itself():
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.metrics import MetricsFile

    from .test_claims_registry import substitute_controls

    claims = load_claims("rpg_encoder").claims
    assert all(c.not_testable or c.controls or c.no_control or c.by_construction for c in claims)
    controlled = [c for c in claims if c.controls]
    assert {c.id for c in controlled} == {"sota_verified_acc5"}
    for claim in controlled:
        mf = MetricsFile("rpg_encoder", "test", replicates=[0, 1, 2])
        for c in claim.conditions:  # the method far above its controls (Acc@5 / coverage-like values)
            for name, values in ((c.metric, [0.97, 0.98, 0.99]), (c.control, [0.40, 0.46, 0.43])):
                if name not in mf.metrics:
                    mf.add(name, values, unit="fraction", direction="higher", description="")
        assert V.judge_claim(claim, mf).verdict == V.REPRODUCED, claim.id
        assert V.judge_claim(claim, substitute_controls(claim, mf)).verdict != V.REPRODUCED, claim.id


def test_hierarchy_agreement_is_one_for_the_same_partition_and_counts_moves():
    a = E.encode("pkg", NEW, E.Settings(area_size=2, sub_size=1, seed=0))
    assert hierarchy_agreement(a, a) == {"subarea_ari": 1.0, "area_ari": 1.0}
    b = dataclasses.replace(a, hierarchy=E._copy_hierarchy(a.hierarchy))
    files = sorted(b.hierarchy.file_sub)
    b.hierarchy.file_sub = {f: b.hierarchy.file_sub[files[0]] for f in files}  # everything in one sub-area
    assert hierarchy_agreement(a, b)["subarea_ari"] == 0.0 < len(set(a.hierarchy.file_sub.values())) - 1


# --- the smoke chain through Snakemake -------------------------------------------------------------
@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    check_smoke_paper(smoke_run, "rpg_encoder", ("localization.png", "release_costs.png", "cost_vs_size.png",
                                                 "coverage.png"),
                      lambda name: name.startswith(("encode_seconds", "localize_seconds")))


def test_simulated_commits_stay_valid_on_awkward_layouts():
    tree = {"m.py": src("""
        def f(a,
              **kw): return a


        def g(x):
            'Only a docstring.'


        class C:
            def h(self, y,
                  z):
                'Doc.'
                return y


        if True:
            def only_in_a_block():
                pass
        """)}
    for seed in range(5):
        new, done = simulate_commit(tree, E.parse_tree(tree), modify=4, add=0, delete=0,
                                    rng=np.random.default_rng(seed), tag="x")
        assert done["modified"] == 3  # g, C.h and the block's function; f (body on the signature line) is not
        d = E.diff(E.parse_tree(tree), E.parse_tree(new))
        assert set(d.modified["m.py"]["changed"]) == {"m.py:g", "m.py:C", "m.py:C.h", "m.py:only_in_a_block"}
        assert E.parse_tree(new)["m.py"].units[1].docstring == "Only a docstring."  # docstring kept in place
        new, done = simulate_commit(tree, E.parse_tree(tree), modify=1, add=2, delete=2,
                                    rng=np.random.default_rng(seed), tag="y")
        assert done["added"] + done["deleted"] == 2  # only f and g (column 0) may be copied or deleted
        assert not E.parse_tree(new)["m.py"].syntax_error
