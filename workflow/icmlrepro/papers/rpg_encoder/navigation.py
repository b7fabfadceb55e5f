"""Issue localization over one repository: BM25 over code, the dependency graph, and RPG navigation.

All three rank the repository's functions and methods for an issue text and share the
tokenizer, the BM25 implementation and the file ranking (a file scores as its best unit):

* ``bm25_code``: BM25 over each unit's code (with its path and qualified name), as the code
  search baselines do; tuned over (k1, b).
* ``dep_graph``: the same code scores as seeds, anchoring, then expansion over the dependency
  graph (invokes edges in both directions, a constructor call reaching ``__init__``): a unit
  gains ``expand_weight`` times the best score among its neighbours up to ``hops`` steps away
  (halved per extra step). Anchoring is the graph's search by metadata: a dotted name in the
  issue that is a package, a module or a ``module.Class`` of the repository adds ``anchor_weight``
  to the units that node contains (a package: the units of every module under it). This is the
  LocAgent-style code graph without semantics; tuned over (expand_weight, hops, anchor_weight).
* ``rpg``: the RPG's search by features fused with code search, then the same anchoring and
  expansion. A unit's feature document is its lifted feature plus its path in the functional
  hierarchy (class feature, file summary, sub-area and area labels), which is what navigating
  the RPG top-down sees; tuned over (feature_weight, expand_weight, anchor_weight).

Each method gets a grid of the same size (the same tuning budget), picked on the dev tasks.

*Components.* An issue is filed against a component of the repository, as bug trackers ask: the
repository's files (those with functions or methods) in path order, cut into consecutive runs of
``component_files`` files (None: one component). Every method ranks only the units and files of the
gold's component; its index (BM25 statistics, dependency graph, hierarchy) stays that of the whole
repository. The component is the repository-size knob of the miniature: the chance level of a task
is 5 / the units of its component. A component narrows the search to about ``component_files`` files
without saying which of them holds the gold.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from .bm25 import BM25
from .text import tokenize

METHODS = ("bm25_code", "dep_graph", "rpg")
UNIT_KINDS = ("function", "method")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def _normalised(s: np.ndarray) -> np.ndarray:
    m = s.max() if s.size else 0.0
    return s / m if m > 0 else s


def neighbour_max(adj: sparse.csr_matrix, s: np.ndarray) -> np.ndarray:
    """For every node, the largest value of ``s`` among its neighbours (0 without neighbours)."""
    out = np.zeros(adj.shape[0])
    counts = np.diff(adj.indptr)
    rows = np.flatnonzero(counts)
    if rows.size:
        vals = s[adj.indices]
        out[rows] = np.maximum.reduceat(vals, adj.indptr[rows])
    return out


def expand(s: np.ndarray, adj: sparse.csr_matrix, weight: float, hops: int, decay: float) -> np.ndarray:
    """s + weight * max over k <= hops of decay^(k-1) * (best score k steps away)."""
    best = np.zeros_like(s)
    frontier = s
    for k in range(int(hops)):
        frontier = neighbour_max(adj, frontier)
        best = np.maximum(best, decay**k * frontier)
    return s + weight * best


@dataclass
class RepoIndex:
    """The search structures of one repository's RPG (built from the node and edge tables)."""

    repo: str
    ids: np.ndarray  # candidate unit ids, sorted
    files: np.ndarray  # file of each candidate
    code_docs: list[list[str]]
    own_feature_docs: list[list[str]]  # the unit's own feature phrase
    context_docs: list[list[str]]  # what navigating the hierarchy adds: class, file, sub-area, area text
    adj: sparse.csr_matrix
    anchors: dict[str, np.ndarray]  # package, module or module.Class -> candidate positions it contains
    component_files: int | None = None  # files per component (None: the whole repository is one)

    @classmethod
    def build(cls, repo: str, nodes: pd.DataFrame, edges: pd.DataFrame,
              component_files: int | None = None) -> "RepoIndex":
        nodes = nodes[nodes.repo == repo]
        edges = edges[edges.repo == repo]
        text = dict(zip(nodes.id, nodes.text))
        cand = nodes[nodes.kind.isin(UNIT_KINDS)].sort_values("id")
        ids = cand.id.to_numpy()
        pos = {u: i for i, u in enumerate(ids)}
        code_docs = [tokenize(f"{p} {q} {c}") for p, q, c in zip(cand.path, cand.qualname, cand.code)]
        own_docs, context_docs = [], []
        for r in cand.itertuples(index=False):
            owner = f"{r.path}:{r.parent}" if r.parent else ""
            own_docs.append(tokenize(r.text))
            parts = [text.get(owner, ""), text.get(r.path, ""), text.get(r.subarea, ""), text.get(r.area, "")]
            context_docs.append(tokenize(" ".join(parts)))
        init = {f"{p}:{q.rsplit('.', 1)[0]}": u for u, p, q in zip(cand.id, cand.path, cand.qualname)
                if q.endswith(".__init__")}
        inv = edges[edges.type == "invokes"]
        pairs = []
        for a, b in zip(inv.src, inv.dst):
            b = init.get(b, b)  # calling a class runs its __init__
            if a in pos and b in pos and a != b:
                pairs += [(pos[a], pos[b]), (pos[b], pos[a])]
        n = len(ids)
        if pairs:
            r, c = zip(*sorted(set(pairs)))
            adj = sparse.csr_matrix((np.ones(len(r)), (r, c)), shape=(n, n))
        else:
            adj = sparse.csr_matrix((n, n))
        groups: dict[str, list[int]] = {}
        for i, (p, parent) in enumerate(zip(cand.path, cand.parent)):
            module = p[:-3].replace("/__init__", "").replace("/", ".")
            groups.setdefault(module, []).append(i)
            parts = module.split(".")
            for k in range(1, len(parts)):  # the packages above the module contain its units too
                groups.setdefault(".".join(parts[:k]), []).append(i)
            if parent:
                groups.setdefault(f"{module}.{parent}", []).append(i)
        anchors = {k: np.unique(v) for k, v in groups.items()}
        return cls(repo, ids, cand.path.to_numpy(), code_docs, own_docs, context_docs, adj, anchors,
                   component_files)

    def anchor(self, query: str) -> np.ndarray:
        """1 for units inside the most specific module/class each dotted name of the issue names."""
        a = np.zeros(len(self.ids))
        for mention in DOTTED.findall(query):
            parts = mention.split(".")
            for k in range(len(parts), 0, -1):
                hit = self.anchors.get(".".join(parts[:k]))
                if hit is not None:
                    a[hit] = 1.0
                    break
        return a

    def __post_init__(self):
        self._cache: dict = {}
        self.file_names, self.file_codes = np.unique(self.files, return_inverse=True)
        self.position = {u: i for i, u in enumerate(self.ids)}
        per = self.component_files or max(len(self.file_names), 1)
        self.file_component = np.arange(len(self.file_names)) // int(per)  # files in path order, runs of `per`
        self.component = self.file_component[self.file_codes]

    def _doc(self, which: str, i: int, drop: frozenset = frozenset()) -> list[str]:
        if which == "code":
            return [t for t in self.code_docs[i] if t not in drop]
        return [t for t in self.own_feature_docs[i] if t not in drop] + self.context_docs[i]

    def _bm25(self, which: str, k1: float, b: float) -> BM25:
        key = (which, k1, b)
        if key not in self._cache:
            self._cache[key] = BM25([self._doc(which, i) for i in range(len(self.ids))], k1, b)
        return self._cache[key]

    def _search(self, which: str, k1: float, b: float, query: list[str], drop: tuple | None) -> np.ndarray:
        """BM25 scores; with ``drop = (unit id, tokens)`` that unit is scored without those tokens in
        its own text (code, or own feature phrase), against the same corpus statistics."""
        bm = self._bm25(which, k1, b)
        s = bm.scores(query)
        if drop is not None and drop[1]:
            i = self.position[drop[0]]
            s[i] = bm.score_doc(self._doc(which, i, frozenset(drop[1])), query)
        return s

    def scores(self, method: str, params: dict, fixed: dict, text: str, drop: tuple | None = None) -> np.ndarray:
        """Scores of every candidate unit for the issue ``text`` under one method and setting
        (``drop``: a unit id and the tokens removed from its own indexed text, see :meth:`_search`)."""
        query = tokenize(text)
        if method == "bm25_code":
            return self._search("code", params["k1"], params["b"], query, drop)
        code = _normalised(self._search("code", fixed["k1"], fixed["b"], query, drop))
        if method == "dep_graph":
            seed = code + params["anchor_weight"] * self.anchor(text)
            return expand(seed, self.adj, params["expand_weight"], params["hops"], fixed["decay"])
        if method == "rpg":
            feat = _normalised(self._search("feature", fixed["k1"], fixed["b"], query, drop))
            w = params["feature_weight"]
            seed = w * feat + (1 - w) * code + params["anchor_weight"] * self.anchor(text)
            return expand(seed, self.adj, params["expand_weight"], fixed["hops"], fixed["decay"])
        raise ValueError(f"unknown method {method!r} (known: {', '.join(METHODS)})")

    def candidates(self, gold_file: str) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the units and of the files in the component of ``gold_file`` (every unit and
        file of the repository when the file is not one of its candidates' files)."""
        f = np.searchsorted(self.file_names, gold_file)
        if f >= len(self.file_names) or self.file_names[f] != gold_file:
            return np.arange(len(self.ids)), np.arange(len(self.file_names))
        comp = self.file_component[f]
        return np.flatnonzero(self.component == comp), np.flatnonzero(self.file_component == comp)

    def ranks(self, scores: np.ndarray, gold: str, gold_file: str) -> tuple[int, int]:
        """0-based rank of the gold unit and of its file among the candidates of the gold's component;
        ties go by id / path order (deterministic)."""
        units, files = self.candidates(gold_file)
        order = units[np.argsort(-scores[units], kind="stable")]
        where = np.flatnonzero(self.ids[order] == gold)
        unit_rank = int(where[0]) if where.size else len(units)
        best = np.full(len(self.file_names), -np.inf)
        np.maximum.at(best, self.file_codes, scores)
        file_order = self.file_names[files[np.argsort(-best[files], kind="stable")]]
        where = np.flatnonzero(file_order == gold_file)
        return unit_rank, int(where[0]) if where.size else len(file_order)


def grid(spec: dict[str, list]) -> list[dict]:
    """All combinations of a method's tuning grid, in a fixed order."""
    keys = sorted(spec)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(spec[k] for k in keys))]


def check_equal_budget(tuning: dict[str, dict[str, list]]) -> int:
    sizes = {m: len(grid(tuning[m])) for m in METHODS}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"rpg_encoder: tuning grids must have the same size for every method (got {sizes})")
    return sizes[METHODS[0]]


VARIANTS = {"main": ("query", True), "copied": ("query", False), "prefixed": ("query_prefixed", False)}


def localize(indexes: dict[str, RepoIndex], tasks: pd.DataFrame, method: str, params: dict,
             fixed: dict, variant: str = "main") -> pd.DataFrame:
    """Rank of the gold unit and file for every task under one method and parameter setting.

    ``variant``: ``main`` (name and location masked, the task's ``removed`` words taken out of the gold
    unit's indexed text), ``copied`` (the same query, the gold's text left whole) or ``prefixed`` (the
    location kept, nothing removed): the task as first written, reported beside the main one."""
    column, remove = VARIANTS[variant]
    rows = []
    for t in tasks.itertuples(index=False):
        idx = indexes[t.repo]
        drop = (t.gold, tuple(t.removed)) if remove and len(t.removed) else None
        s = idx.scores(method, params, fixed, getattr(t, column), drop)
        unit_rank, file_rank = idx.ranks(s, t.gold, t.gold_file)
        units, files = idx.candidates(t.gold_file)
        rows.append({"task": t.task, "unit_rank": unit_rank, "file_rank": file_rank, "candidates": len(units),
                     "candidate_files": len(files)})
    return pd.DataFrame(rows, columns=["task", "unit_rank", "file_rank", "candidates", "candidate_files"])


def accuracy(ranks: pd.DataFrame, k: int, level: str = "unit") -> float:
    col = "unit_rank" if level == "unit" else "file_rank"
    return float((ranks[col] < k).mean()) if len(ranks) else float("nan")


def tune(indexes: dict[str, RepoIndex], dev: pd.DataFrame, method: str, spec: dict,
         fixed: dict) -> tuple[dict, pd.DataFrame]:
    """The grid point with the best function-level Acc@5 on the dev tasks (then Acc@1, then grid order)."""
    rows, best, best_key = [], None, None
    for i, params in enumerate(grid(spec)):
        r = localize(indexes, dev, method, params, fixed)
        a5, a1 = accuracy(r, 5), accuracy(r, 1)
        rows.append({"method": method, "config": i, "params": repr(params), "dev_acc5": a5, "dev_acc1": a1})
        key = (a5, a1, -i)
        if best_key is None or key > best_key:
            best, best_key = params, key
    table = pd.DataFrame(rows)
    table["chosen"] = table["config"] == -best_key[2]
    return best, table
