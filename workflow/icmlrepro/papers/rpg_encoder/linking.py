"""Dependency edges from the AST: imports (file -> file), invokes (unit -> unit), inherits (class -> class).

Names are resolved statically inside one repository, the way a reader follows them: a name
defined at module level, an imported alias (``import a.b as c``, ``from .x import y``, re-exports
through a package ``__init__`` and ``from m import *``, followed up to a few hops), attribute
chains through modules and classes, ``self.m()``/``cls.m()`` through the class and its in-repo
bases, and ``super().m()`` through the bases. Calls on objects of unknown type stay unresolved
(no guessing by name), so every edge points where the code really does.
"""

from __future__ import annotations

from .code_units import ParsedFile

MAX_HOPS = 4


class SymbolTable:
    """Modules, module-level definitions and class methods of one repository."""

    def __init__(self, files: dict[str, ParsedFile]):
        self.files = files
        self.by_module = {pf.module: pf for pf in files.values() if not pf.syntax_error}
        self.defs: dict[tuple[str, str], str] = {}
        self.methods: dict[str, dict[str, str]] = {}
        self.unit_file: dict[str, ParsedFile] = {}
        self.unit_kind: dict[str, str] = {}
        for pf in files.values():
            for u in pf.units:
                uid = f"{pf.path}:{u.qualname}"
                self.unit_file[uid] = pf
                self.unit_kind[uid] = u.kind
                if u.parent is None:
                    self.defs[(pf.module, u.name)] = uid
                else:
                    self.methods.setdefault(f"{pf.path}:{u.parent}", {})[u.name] = uid
        self.aliases = {pf.module: {} for pf in self.by_module.values()}
        for pf in self.by_module.values():
            for imp in pf.imports:  # the last binding of an alias wins, as at run time
                self.aliases[pf.module][imp.alias] = imp
        self.bases: dict[str, list[str]] = {}  # filled in order; a base's own bases may still be missing
        for pf in self.by_module.values():
            for u in pf.units:
                if u.kind == "class":
                    uid = f"{pf.path}:{u.name}"
                    resolved = [self.resolve(pf.module, b) for b in u.bases]
                    self.bases[uid] = [r for r in resolved if r and self.unit_kind.get(r) == "class" and r != uid]

    # -- names -----------------------------------------------------------------------------------
    def attr(self, module: str, name: str, hops: int = 0) -> str | None:
        """What ``module.name`` is: a unit id, ``"module:<name>"`` for a module, or None."""
        if hops > MAX_HOPS or module not in self.by_module:
            return f"module:{module}.{name}" if f"{module}.{name}" in self.by_module else None
        uid = self.defs.get((module, name))
        if uid:
            return uid
        imp = self.aliases[module].get(name)
        if imp is not None:
            return self._follow(imp, hops + 1)
        if f"{module}.{name}" in self.by_module:
            return f"module:{module}.{name}"
        for star in self.by_module[module].star_imports:
            found = self.attr(star, name, hops + 1)
            if found and not found.startswith("module:"):
                return found
        return None

    def _follow(self, imp, hops: int) -> str | None:
        if imp.name is None:
            return f"module:{imp.module}" if imp.module in self.by_module else None
        return self.attr(imp.module, imp.name, hops)

    def method(self, class_id: str, name: str, seen: frozenset = frozenset()) -> str | None:
        """A method of a class or, failing that, of its in-repo bases (depth first, like a simple MRO)."""
        if class_id in seen:
            return None
        found = self.methods.get(class_id, {}).get(name)
        if found:
            return found
        for base in self.bases.get(class_id, []):
            found = self.method(base, name, seen | {class_id})
            if found:
                return found
        return None

    def resolve(self, module: str, dotted: str) -> str | None:
        """A dotted name as written in ``module``: a unit id, ``module:<name>``, or None."""
        head, *rest = dotted.split(".")
        cur = self.defs.get((module, head))
        if cur is None and module in self.aliases and head in self.aliases[module]:
            cur = self._follow(self.aliases[module][head], 1)
        if cur is None and module in self.by_module:
            for star in self.by_module[module].star_imports:
                cur = self.attr(star, head, 1)
                if cur:
                    break
        for part in rest:
            if cur is None:
                return None
            if cur.startswith("module:"):
                cur = self.attr(cur[len("module:"):], part, 1)
            elif self.unit_kind.get(cur) == "class":
                cur = self.method(cur, part)
            else:
                return None
        return cur


def dependency_edges(files: dict[str, ParsedFile]) -> list[tuple[str, str, str]]:
    """(source, target, type) for imports, invokes and inherits, sorted and without duplicates."""
    table = SymbolTable(files)
    edges: set[tuple[str, str, str]] = set()
    for pf in table.by_module.values():
        for imp in pf.imports:
            target = table._follow(imp, 1) if imp.name is not None else (
                f"module:{imp.module}" if imp.module in table.by_module else None)
            mod = None
            if target and target.startswith("module:"):
                mod = table.by_module.get(target[len("module:"):])
            elif imp.module in table.by_module:
                mod = table.by_module[imp.module]
            if mod is not None and mod.path != pf.path:
                edges.add((pf.path, mod.path, "imports"))
        for star in pf.star_imports:
            if star in table.by_module and table.by_module[star].path != pf.path:
                edges.add((pf.path, table.by_module[star].path, "imports"))
        for u in pf.units:
            uid = f"{pf.path}:{u.qualname}"
            if u.kind == "class":
                for base in table.bases.get(uid, []):
                    edges.add((uid, base, "inherits"))
                continue
            owner = f"{pf.path}:{u.parent}" if u.parent else None
            for call in u.calls:
                head, _, tail = call.partition(".")
                target = None
                if owner and head in ("self", "cls") and tail and "." not in tail:
                    target = table.method(owner, tail)
                elif owner and head == "super" and tail and "." not in tail:
                    for base in table.bases.get(owner, []):
                        target = table.method(base, tail)
                        if target:
                            break
                elif head not in ("self", "cls", "super"):
                    target = table.resolve(pf.module, call)
                if target and not target.startswith("module:") and target != uid:
                    edges.add((uid, target, "invokes"))
    return sorted(edges)
