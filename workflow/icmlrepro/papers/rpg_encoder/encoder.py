"""The Repository Planning Graph: encoding a repository and evolving it incrementally.

Nodes: functional areas and sub-areas (the high-level, code-free hierarchy), directories,
files, classes, functions, methods. Edges: ``composes`` (area -> sub-area -> file), ``contains``
(directory -> directory/file, file -> class/function, class -> method), ``imports``,
``invokes``, ``inherits`` (from the AST, :mod:`.linking`). A unit node carries its lifted
feature and its metadata (kind, path, qualified name, line range); a file node its summary;
an area its label and grounding directory.

:func:`encode` is the full build. :func:`update` is the paper's incremental evolution: diff old
and new trees (.py files); added files are lifted, summarised and placed; deleted files'
nodes are removed and empty areas pruned; in modified files only added and changed units are
re-lifted, the file is re-summarised, and re-placed only if its summary changed. Dependency
edges are re-derived from the AST of every file (cheap, no lifting). The :class:`Lifter`
ledger counts what each path pays.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import pandas as pd

from . import hierarchy as H
from .code_units import ParsedFile, parse_file
from .lifting import Lifter
from .linking import dependency_edges


@dataclass
class Settings:
    """Lifting and hierarchy settings (config key ``lifting``) plus the clustering seed."""

    max_words: int = 16
    summary_terms: int = 8
    area_size: int = 12
    sub_size: int = 4
    label_terms: int = 4
    seed: int = 0

    @classmethod
    def from_params(cls, lifting: dict, seed: int) -> "Settings":
        return cls(lifting["max_words"], lifting["summary_terms"], lifting["area_size"], lifting["sub_size"],
                   lifting["label_terms"], int(seed))


@dataclass
class RPG:
    repo: str
    files: dict[str, ParsedFile] = field(default_factory=dict)
    features: dict[str, str] = field(default_factory=dict)  # unit id -> feature phrase
    lifted: dict[str, str] = field(default_factory=dict)  # unit id -> fingerprint it was lifted from
    summaries: dict[str, str] = field(default_factory=dict)  # file path -> summary
    hierarchy: H.Hierarchy = field(default_factory=H.Hierarchy)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # dependency edges

    def file_doc(self, path: str) -> str:
        """What the hierarchy clusters and places a file by: its summary and unit features."""
        pf = self.files[path]
        return " ".join([self.summaries[path], *(self.features[f"{path}:{u.qualname}"] for u in pf.units)])


def parse_tree(sources: dict[str, str], known: dict[str, ParsedFile] | None = None) -> dict[str, ParsedFile]:
    """Parse every .py file; a file whose text is unchanged from ``known`` keeps its parse (CPU only:
    the result is the same, and parsing is not what the cost ledger counts)."""
    known = known or {}
    out = {}
    for p, s in sorted(sources.items()):
        if not p.endswith(".py"):
            continue
        old = known.get(p)
        if old is not None and old.digest == hashlib.sha1(s.encode("utf-8", errors="replace")).hexdigest():
            out[p] = old
        else:
            out[p] = parse_file(p, s)
    return out


def _lift_file(rpg: RPG, pf: ParsedFile, lifter: Lifter, keep: set[str] = frozenset()) -> None:
    """Lift the units of one file (except ids in ``keep``, whose features stay), then summarise it."""
    for u in pf.units:
        uid = f"{pf.path}:{u.qualname}"
        if uid not in keep:
            rpg.features[uid] = lifter.lift(u)
            rpg.lifted[uid] = u.fingerprint
    rpg.summaries[pf.path] = lifter.summarize(pf.path, pf.docstring,
                                              [rpg.features[f"{pf.path}:{u.qualname}"] for u in pf.units])


def encode(repo: str, sources: dict[str, str], settings: Settings, lifter: Lifter | None = None,
           parsed: dict[str, ParsedFile] | None = None) -> RPG:
    """Full build: parse, lift every unit, summarise and place every file, link dependencies."""
    lifter = lifter or Lifter(settings.max_words, settings.summary_terms)
    rpg = RPG(repo, parse_tree(sources, parsed))
    for pf in rpg.files.values():
        _lift_file(rpg, pf, lifter)
    rpg.hierarchy = H.build({p: rpg.file_doc(p) for p in rpg.files}, settings.area_size, settings.sub_size,
                            settings.label_terms, settings.seed)
    lifter.placed(len(rpg.files))
    rpg.edges = dependency_edges(rpg.files)
    return rpg


@dataclass
class Diff:
    added_files: list[str]
    deleted_files: list[str]
    modified: dict[str, dict[str, list[str]]]  # path -> {"added"|"changed"|"deleted": unit ids}

    @property
    def n_changed_units(self) -> int:
        return sum(len(v["added"]) + len(v["changed"]) for v in self.modified.values())


def diff(old: dict[str, ParsedFile], new: dict[str, ParsedFile]) -> Diff:
    """File-level and unit-level differences (unit keys: kind, name, class; change = fingerprint)."""
    added = sorted(set(new) - set(old))
    deleted = sorted(set(old) - set(new))
    modified = {}
    for path in sorted(set(old) & set(new)):
        o = {u.key: u for u in old[path].units}
        n = {u.key: u for u in new[path].units}
        d = {"added": [f"{path}:{n[k].qualname}" for k in n if k not in o],
             "changed": [f"{path}:{n[k].qualname}" for k in n if k in o and o[k].fingerprint != n[k].fingerprint],
             "deleted": [f"{path}:{o[k].qualname}" for k in o if k not in n]}
        if any(d.values()):
            modified[path] = d
    return Diff(added, deleted, modified)


def update(rpg: RPG, sources: dict[str, str], settings: Settings, lifter: Lifter | None = None) -> tuple[RPG, Diff]:
    """Incremental evolution of ``rpg`` to the new tree ``sources``; returns the new graph and the diff."""
    lifter = lifter or Lifter(settings.max_words, settings.summary_terms)
    new_files = parse_tree(sources, rpg.files)
    d = diff(rpg.files, new_files)
    out = RPG(rpg.repo, new_files, dict(rpg.features), dict(rpg.lifted), dict(rpg.summaries),
              _copy_hierarchy(rpg.hierarchy))
    h = out.hierarchy
    for path in d.deleted_files:
        for u in rpg.files[path].units:
            uid = f"{path}:{u.qualname}"
            out.features.pop(uid, None), out.lifted.pop(uid, None)
        out.summaries.pop(path, None)
        h.file_sub.pop(path, None)
    for path, changes in d.modified.items():
        for uid in changes["deleted"]:
            out.features.pop(uid, None), out.lifted.pop(uid, None)
        fresh = set(changes["added"]) | set(changes["changed"])
        keep = {f"{path}:{u.qualname}" for u in new_files[path].units} - fresh
        old_summary = out.summaries[path]
        _lift_file(out, new_files[path], lifter, keep)
        if out.summaries[path] != old_summary:  # relocate only when the file's summary changed
            h.file_sub.pop(path, None)
            H.place(h, path, out.file_doc(path))
            lifter.placed()
    for path in d.added_files:
        _lift_file(out, new_files[path], lifter)
        H.place(h, path, out.file_doc(path))
        lifter.placed()
    h.prune()
    out.edges = dependency_edges(new_files)
    return out, d


def _copy_hierarchy(h: H.Hierarchy) -> H.Hierarchy:
    return H.Hierarchy(dict(h.area_label), dict(h.sub_area), dict(h.sub_label), dict(h.file_sub),
                       h.vectorizer, dict(h.centroids))


# --- the graph as networkx and as tables ---------------------------------------------------------
def _dirs(path: str) -> list[str]:
    parts = os.path.dirname(path).split("/") if os.path.dirname(path) else []
    return ["."] + ["/".join(parts[: i + 1]) for i in range(len(parts))]


def node_table(rpg: RPG) -> pd.DataFrame:
    """One row per node (areas, sub-areas, directories, files, units) with kind, text and metadata."""
    rows = []
    h = rpg.hierarchy
    for aid, label in sorted(h.area_label.items()):
        rows.append({"id": aid, "kind": "area", "path": h.grounding(aid), "text": label})
    for sid, label in sorted(h.sub_label.items()):
        rows.append({"id": sid, "kind": "subarea", "path": h.grounding(sid), "text": label, "area": h.sub_area[sid]})
    dirs = sorted({d for p in rpg.files for d in _dirs(p)})
    rows += [{"id": f"dir:{d}", "kind": "directory", "path": d, "text": ""} for d in dirs]
    for path, pf in sorted(rpg.files.items()):
        sub = h.file_sub.get(path, "")
        rows.append({"id": path, "kind": "file", "path": path, "text": rpg.summaries[path], "subarea": sub,
                     "area": h.sub_area.get(sub, ""), "docstring": pf.docstring})
        for u in pf.units:
            uid = f"{path}:{u.qualname}"
            rows.append({"id": uid, "kind": u.kind, "path": path, "text": rpg.features[uid], "qualname": u.qualname,
                         "parent": u.parent or "", "lineno": u.lineno, "end_lineno": u.end_lineno,
                         "docstring": u.docstring, "code": u.code, "args": list(u.args), "signature": u.signature,
                         "identifiers": list(u.identifiers), "messages": list(u.messages),
                         "subarea": sub, "area": h.sub_area.get(sub, "")})
    df = pd.DataFrame(rows)
    for col in ("qualname", "parent", "docstring", "code", "signature", "subarea", "area"):
        df[col] = df[col].fillna("") if col in df else ""
    for col in ("lineno", "end_lineno"):
        df[col] = df[col].fillna(0).astype("int64") if col in df else 0
    for col in ("args", "identifiers", "messages"):
        df[col] = [v if isinstance(v, list) else [] for v in df[col]] if col in df else [[] for _ in range(len(df))]
    df.insert(0, "repo", rpg.repo)
    return df


def edge_table(rpg: RPG) -> pd.DataFrame:
    """Hierarchy, containment and dependency edges as (repo, src, dst, type) rows."""
    h = rpg.hierarchy
    rows = [(a, s, "composes") for s, a in sorted(h.sub_area.items())]
    rows += [(s, f, "composes") for f, s in sorted(h.file_sub.items())]
    for path, pf in sorted(rpg.files.items()):
        chain = _dirs(path)
        rows += [(f"dir:{a}", f"dir:{b}", "contains") for a, b in zip(chain, chain[1:])]
        rows.append((f"dir:{chain[-1]}", path, "contains"))
        for u in pf.units:
            src = f"{path}:{u.parent}" if u.parent else path
            rows.append((src, f"{path}:{u.qualname}", "contains"))
    rows += list(rpg.edges)
    df = pd.DataFrame(sorted(set(rows)), columns=["src", "dst", "type"])
    df.insert(0, "repo", rpg.repo)
    return df


def to_networkx(nodes: pd.DataFrame, edges: pd.DataFrame):
    """The RPG of one repository as a networkx MultiDiGraph (edge key = edge type)."""
    import networkx as nx  # only the stages that inspect the graph pay for the import

    g = nx.MultiDiGraph()
    for row in nodes.itertuples(index=False):
        g.add_node(row.id, kind=row.kind, path=row.path, text=row.text)
    for row in edges.itertuples(index=False):
        g.add_edge(row.src, row.dst, key=row.type, type=row.type)
    return g


def structure(nodes: pd.DataFrame, edges: pd.DataFrame) -> dict[str, int]:
    """Check the RPG's two trees and count its parts; raise if the structure is broken.

    ``contains`` must form one arborescence rooted at the top directory that reaches every
    directory, file and unit; ``composes`` must hang every file under exactly one sub-area and
    every sub-area under exactly one area (the functional hierarchy is a forest of areas).
    """
    import networkx as nx

    g = to_networkx(nodes, edges)
    contains = nx.DiGraph([(u, v) for u, v, k in g.edges(keys=True) if k == "contains"])
    structural = set(nodes.id[nodes.kind.isin(["directory", "file", "class", "function", "method"])])
    if not (nx.is_arborescence(contains) and set(contains) == structural):
        raise ValueError("rpg_encoder: the contains edges do not form one tree over directories, files and units")
    composes = nx.DiGraph([(u, v) for u, v, k in g.edges(keys=True) if k == "composes"])
    files = set(nodes.id[nodes.kind == "file"])
    roots = [n for n in composes if composes.in_degree(n) == 0]
    if not (nx.is_forest(composes) and all(composes.in_degree(f) == 1 for f in files)
            and all(g.nodes[n].get("kind") == "area" for n in roots)):
        raise ValueError("rpg_encoder: the functional hierarchy does not place every file under one sub-area and area")
    counts = {f"nodes_{k}": int(v) for k, v in nodes.kind.value_counts().sort_index().items()}
    counts.update({f"edges_{k}": int(v) for k, v in edges.type.value_counts().sort_index().items()})
    dep = nx.Graph([(u, v) for u, v, k in g.edges(keys=True) if k in ("imports", "invokes", "inherits")])
    counts["dependency_components"] = nx.number_connected_components(dep) if dep.number_of_nodes() else 0
    return counts
