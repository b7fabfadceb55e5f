"""Reconstruction coverage: rebuild each module's stub from the RPG alone and check it against run time.

The paper's coverage asks how much of a repository a representation lets one rebuild. Here the
RPG's unit nodes (kind, qualified name, parent class, parameter list in their metadata) are
written back as a Python stub per file (``class C:`` / ``def m(self, x, y=...): ...``), the stub is
parsed again, and every function, class and method the module defines at run time
(:mod:`.inventory`) is checked against it: present with the same kind (``names``), and for
functions and methods with the same parameter names, kinds and default positions (``full``).
It fails wherever the parser misses a definition (nested classes, methods under control flow in
a class body, factory-made classes), keeps another definition than the one that runs (the first
of several ``def f`` in a file, ``@overload`` stubs), or a decorator changes the signature.

The documentation-only representation knows what the docstrings say: an entity counts when it
has its own docstring and, for a function, every parameter (besides ``self``/``cls``) is named in it.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pandas as pd

from .signatures import from_ast, parameter_names

UNIT_KINDS = ("class", "function", "method")


def _params(signature: str) -> str:
    inner = (signature or "()").strip()[1:-1]
    return ", ".join(p.strip() + "..." if p.strip().endswith("=") else p.strip() for p in inner.split(",")
                     if p.strip())


def stub_source(units: pd.DataFrame) -> str:
    """The stub of one file from its unit nodes: classes with their methods, then functions."""
    lines: list[str] = []
    classes = units[units.kind == "class"]
    methods = units[units.kind == "method"].groupby("parent")
    have = set(methods.groups)
    for c in classes.itertuples(index=False):
        lines.append(f"class {c.qualname}:")
        body = methods.get_group(c.qualname) if c.qualname in have else units.iloc[:0]
        lines += [f"    def {m.qualname.split('.')[-1]}({_params(m.signature)}): ..." for m in body.itertuples(index=False)]
        if body.empty:
            lines.append("    ...")
    lines += [f"def {f.qualname}({_params(f.signature)}): ..." for f in units[units.kind == "function"].itertuples(index=False)]
    return "\n".join(lines) + "\n"


def stub_entities(source: str) -> dict[str, tuple[str, str]]:
    """qualname -> (kind, signature) of every class and function a stub defines (nested included)."""
    out: dict[str, tuple[str, str]] = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(prefix + node.name, ("class", ""))
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(prefix + node.name, ("function", from_ast(node.args)))

    walk(ast.parse(source).body, "")
    return out


def _doc_covers(kind: str, signature: str, docstring: str) -> bool:
    if not docstring:
        return False
    if kind == "class":
        return True
    names = [n for n in parameter_names(signature) if n not in ("self", "cls")]
    return all(re.search(rf"\b{re.escape(n)}\b", docstring) for n in names)


def reconstruction_table(inventory: pd.DataFrame, nodes: pd.DataFrame) -> pd.DataFrame:
    """One row per run-time entity: rebuilt from the RPG by name and kind, fully (with the signature),
    and by the documentation-only representation."""
    units = nodes[nodes.kind.isin(UNIT_KINDS)]
    stubs = {(repo, path): stub_entities(stub_source(g)) for (repo, path), g in units.groupby(["repo", "path"])}
    rows = []
    for r in inventory.itertuples(index=False):
        got = stubs.get((r.repo, r.path), {}).get(r.qualname)
        name_ok = got is not None and got[0] == r.kind
        full_ok = name_ok and (r.kind == "class" or got[1] == r.signature)
        rows.append({"repo": r.repo, "path": r.path, "qualname": r.qualname, "kind": r.kind, "rpg_name": name_ok,
                     "rpg": full_ok, "docs": _doc_covers(r.kind, r.signature, r.docstring)})
    return pd.DataFrame(rows, columns=["repo", "path", "qualname", "kind", "rpg_name", "rpg", "docs"])


def bootstrap_shares(table: pd.DataFrame, columns: list[str], rng: np.random.Generator) -> dict[str, float]:
    """Pooled shares of ``columns`` over a resample of the files (with replacement): one replicate of
    the spread a benchmark of this many modules has."""
    per_file = table.groupby(["repo", "path"])[columns].agg(["sum", "count"])
    pick = rng.integers(0, len(per_file), len(per_file))
    sample = per_file.iloc[pick]
    return {c: float(sample[(c, "sum")].sum() / sample[(c, "count")].sum()) for c in columns}
