"""Keeping the graph current: incremental updates against full rebuilds, on real and simulated changes.

Real changes: consecutive releases of a package (:mod:`.sources`), replayed in order. The
incrementally maintained graph starts from a full build of the first release and is updated
at every later release; at each release a full rebuild is run too. Costs are the lifting
ledgers (units lifted, files summarised, files placed) of both paths.

Simulated commits of a fixed size, on repositories of different sizes, show how each path's
cost grows with the repository: a commit modifies ``modify`` functions/methods (a statement
inserted in the body), adds ``add`` new functions (a copy of an existing one under a new name,
appended to its file) and deletes ``delete`` top-level functions. Edits are made on the text,
so every other byte of the file stays as it was.
"""

from __future__ import annotations

import ast
import re

import numpy as np
from sklearn.metrics import adjusted_rand_score

from . import encoder as E
from .code_units import ParsedFile, Unit
from .lifting import Lifter

COST_KINDS = ("unit", "file_summary", "placement")


def _lifter(settings: E.Settings) -> Lifter:
    return Lifter(settings.max_words, settings.summary_terms)


def ledger(lifter: Lifter) -> dict[str, int]:
    return {k: int(lifter.calls.get(k, 0)) for k in COST_KINDS}


def hierarchy_agreement(a: E.RPG, b: E.RPG) -> dict[str, float]:
    """Adjusted Rand index of the file -> sub-area and file -> area assignments of two graphs (shared
    files): 1 = the same partition, about 0 = no more alike than chance."""
    ha, hb = a.hierarchy, b.hierarchy
    files = sorted(set(ha.file_sub) & set(hb.file_sub))
    if not files:
        return {"subarea_ari": float("nan"), "area_ari": float("nan")}
    return {"subarea_ari": float(adjusted_rand_score([ha.file_sub[f] for f in files], [hb.file_sub[f] for f in files])),
            "area_ari": float(adjusted_rand_score([ha.sub_area[ha.file_sub[f]] for f in files],
                                                  [hb.sub_area[hb.file_sub[f]] for f in files]))}


def compare(incremental: E.RPG, full: E.RPG) -> dict[str, float]:
    """How far the incrementally kept graph is from a full rebuild of the same tree: units, edges,
    features, file summaries and the functional hierarchy."""
    units_i, units_f = dict(incremental.features), dict(full.features)
    shared = sorted(set(units_i) & set(units_f))
    same = sum(units_i[u] == units_f[u] for u in shared)
    return {
        "same_units": float(set(units_i) == set(units_f)),
        "same_dependency_edges": float(incremental.edges == full.edges),
        "feature_agreement": same / len(shared) if shared else float("nan"),
        "summary_agreement": float(np.mean([incremental.summaries.get(p) == full.summaries[p]
                                            for p in full.summaries])) if full.summaries else float("nan"),
        **hierarchy_agreement(incremental, full),
    }


def replay(series: list[tuple[str, dict[str, str]]], settings: E.Settings) -> tuple[list[dict], E.RPG, E.RPG]:
    """Replay (version, sources) in order; one row per difference with both paths' costs.

    Returns the rows, the incrementally kept graph of the last version and its full rebuild.
    """
    rows = []
    kept = E.encode("release", series[0][1], settings)
    full = kept
    for (v_old, _), (v_new, src) in zip(series, series[1:]):
        inc_lifter, full_lifter = _lifter(settings), _lifter(settings)
        kept, d = E.update(kept, src, settings, inc_lifter)
        full = E.encode("release", src, settings, full_lifter)
        inc, fc = ledger(inc_lifter), ledger(full_lifter)
        rows.append({"old": v_old, "new": v_new, "files": len(full.files), "units": len(full.features),
                     "added_files": len(d.added_files), "deleted_files": len(d.deleted_files),
                     "modified_files": len(d.modified), "changed_units": d.n_changed_units,
                     **{f"incremental_{k}": v for k, v in inc.items()}, **{f"full_{k}": v for k, v in fc.items()},
                     "incremental_cost": sum(inc.values()), "full_cost": sum(fc.values()), **compare(kept, full)})
    return rows, kept, full


# --- simulated commits --------------------------------------------------------------------------
_INDENT = re.compile(r"^([ \t]*)")


def _editable(u: Unit, lines: list[str]) -> bool:
    """The body starts on a line of its own (not after ``def f(...):`` on the same line)."""
    return u.body_line > u.lineno and not lines[u.body_line - 1][: u.body_col].strip()


def _top_level(u: Unit, lines: list[str]) -> bool:
    """A function written at column 0 (not inside an ``if``/``try`` block): safe to delete or copy."""
    return u.kind == "function" and not lines[u.lineno - 1][:1].isspace()


def simulate_commit(sources: dict[str, str], files: dict[str, ParsedFile], modify: int, add: int, delete: int,
                    rng: np.random.Generator, tag: str) -> tuple[dict[str, str], dict[str, int]]:
    """A commit of fixed size on a copy of ``sources`` (parsed as ``files``); the new tree and what was done.

    Deleted: random top-level functions (never a file's only statement); added: copies of other
    random top-level functions under a new name; modified: random functions/methods (not deleted,
    not copied) whose body starts on its own line, with a statement inserted after any docstring.
    """
    funcs = [u for p in sorted(files) for u in files[p].units if u.kind in ("function", "method")]
    order = [funcs[i] for i in rng.permutation(len(funcs))]
    lines = {p: sources[p].splitlines(keepends=True) for p in files}
    used: set[tuple[str, str]] = set()
    deleted, copied, modified = [], [], []
    per_file: dict[str, int] = {}
    for u in order:
        if len(deleted) < delete and _top_level(u, lines[u.path]) \
                and files[u.path].top_statements - per_file.get(u.path, 0) > 1:
            deleted.append(u)
            per_file[u.path] = per_file.get(u.path, 0) + 1
            used.add((u.path, u.qualname))
    for u in order:
        if len(copied) < add and _top_level(u, lines[u.path]) and (u.path, u.qualname) not in used:
            copied.append(u)
            used.add((u.path, u.qualname))
    for u in order:
        if len(modified) < modify and (u.path, u.qualname) not in used and _editable(u, lines[u.path]):
            modified.append(u)
            used.add((u.path, u.qualname))

    inserts: dict[str, dict[int, list[str]]] = {}
    for k, u in enumerate(modified):
        indent = _INDENT.match(lines[u.path][u.body_line - 1]).group(1)
        anchor = u.doc_end + 1 if u.doc_end else u.body_line  # never in front of the docstring
        inserts.setdefault(u.path, {}).setdefault(anchor, []).append(f"{indent}_edit_{tag} = {k}\n")
    drops: dict[str, set[int]] = {}
    for u in deleted:
        drops.setdefault(u.path, set()).update(range(u.lineno, u.end_lineno + 1))
    appends: dict[str, list[str]] = {}
    for u in copied:
        text = "".join(lines[u.path][u.lineno - 1: u.end_lineno])
        appends.setdefault(u.path, []).append(
            re.sub(rf"\bdef\s+{re.escape(u.name)}\b", f"def {u.name}_{tag}", text, count=1))

    new = dict(sources)
    for path in sorted(set(inserts) | set(drops) | set(appends)):
        out = []
        ins, drop = inserts.get(path, {}), drops.get(path, set())
        for ln, line in enumerate(lines[path], start=1):
            if ln in drop:
                continue
            out += ins.get(ln, [])
            out.append(line)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out += ins.get(len(lines[path]) + 1, [])  # after a docstring on the file's last line
        body = "".join(out)
        if appends.get(path):
            body = body.rstrip("\n") + "\n\n\n" + "\n\n".join(t.rstrip("\n") for t in appends[path]) + "\n"
        ast.parse(body)  # a simulated commit must leave valid Python behind
        new[path] = body
    return new, {"modified": len(modified), "added": len(copied), "deleted": len(deleted)}


def commit_costs(rpg: E.RPG, sources: dict[str, str], settings: E.Settings) -> tuple[dict, E.RPG]:
    """Incremental and full-rebuild cost of moving ``rpg`` to the tree ``sources``."""
    inc_lifter, full_lifter = _lifter(settings), _lifter(settings)
    kept, d = E.update(rpg, sources, settings, inc_lifter)
    E.encode(rpg.repo, sources, settings, full_lifter, parsed=kept.files)
    inc, fc = ledger(inc_lifter), ledger(full_lifter)
    return {"changed_units": d.n_changed_units, "modified_files": len(d.modified),
            **{f"incremental_{k}": v for k, v in inc.items()}, **{f"full_{k}": v for k, v in fc.items()},
            "incremental_cost": sum(inc.values()), "full_cost": sum(fc.values())}, kept
