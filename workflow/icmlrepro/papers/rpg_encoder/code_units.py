"""Code units of a Python file, as the RPG-Encoder code cuts them, and the facts the graph needs.

Units follow the published parser (microsoft/RPG-ZeroRepo, ``ParsedFile._extract_units``):
top-level functions and classes, the methods defined directly in a class body, and the
functions/classes found inside top-level control flow (``if``/``try``/``with``/loops); the first
definition of a (kind, name, parent) key wins. Nested functions and classes are part of their
enclosing unit. A unit has *changed* between two versions when its AST without its own
docstring differs (``compare_code_units`` with ``ignore_docstring=True``; class bodies sorted
by the same key), so reformatting and line shifts never count as changes.

For every unit we also record what the lifting and the dependency edges read: docstring,
parameters, called names (as dotted strings), identifiers used, messages of raised
exceptions, base classes; for every file its imports and module docstring.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from dataclasses import dataclass, field

from .signatures import from_ast as signature_from_ast

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
CONTROL_FLOW = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)
if hasattr(ast, "TryStar"):  # Python 3.11+
    CONTROL_FLOW = CONTROL_FLOW + (ast.TryStar,)


@dataclass
class Unit:
    """One function, class or method of a file, with what lifting and linking read from it."""

    kind: str  # "function" | "class" | "method"
    name: str
    parent: str | None  # the class of a method
    path: str
    lineno: int
    end_lineno: int
    fingerprint: str
    docstring: str = ""
    args: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    bases: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    signature: str = ""  # canonical parameter list of a function/method (:mod:`.signatures`)
    code: str = ""
    body_line: int = 0  # where the body's first statement starts (line, column)
    body_col: int = 0
    doc_end: int = 0  # last line of the unit's docstring, 0 without one

    @property
    def qualname(self) -> str:
        return f"{self.parent}.{self.name}" if self.parent else self.name

    @property
    def key(self) -> tuple[str, str, str | None]:
        return (self.kind, self.name, self.parent)


@dataclass
class Import:
    """``import a.b as c`` -> alias c, module a.b; ``from .x import y`` -> module .x (resolved), name y."""

    alias: str
    module: str
    name: str | None  # None for ``import module``


@dataclass
class ParsedFile:
    path: str
    module: str
    is_package: bool
    docstring: str
    units: list[Unit]
    imports: list[Import]
    star_imports: list[str]
    syntax_error: bool = False
    top_statements: int = 0
    digest: str = ""  # sha1 of the source text: an unchanged file need not be parsed again


def module_name(path: str) -> tuple[str, bool]:
    """``email/mime/text.py`` -> (``email.mime.text``, False); ``json/__init__.py`` -> (``json``, True)."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute module that ``from <level dots><target> import ...`` refers to."""
    if level == 0:
        return target or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, target] if target else base)


# --- change detection (the published normalisation) ----------------------------------------------
def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _class_body_key(stmt: ast.stmt) -> str:
    if isinstance(stmt, ast.FunctionDef):
        return f"func:{stmt.name}"
    if isinstance(stmt, ast.Assign):
        return "assign"
    return str(type(stmt))


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False)


def _hash(*parts: str) -> str:
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()


def fingerprint(node: ast.AST, method_prints: dict[int, str] | None = None) -> str:
    """Hash of the unit's AST without its own docstring (class body sorted), line numbers excluded.

    Async functions get the same treatment as plain ones (the published code leaves their
    docstring in, which makes a docstring edit of an ``async def`` count as a change). A class
    hashes its methods through ``method_prints`` (their own fingerprints plus their docstrings),
    which decides equality exactly as dumping the whole class would, at half the cost.
    """
    body = list(node.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    if not body:
        body = [ast.Pass()]
    if not isinstance(node, ast.ClassDef):
        head = copy.copy(node)
        head.body = []
        return _hash(_dump(head), *map(_dump, body))
    method_prints = method_prints or {}
    parts = []
    for stmt in sorted(body, key=_class_body_key):
        if id(stmt) in method_prints:
            parts.append(f"method:{method_prints[id(stmt)]}:{ast.get_docstring(stmt, clean=False)!r}")
        else:
            parts.append(_dump(stmt))
    head = copy.copy(node)
    head.body = []
    return _hash("class", _dump(head), *parts)


# --- facts read from a unit ----------------------------------------------------------------------
def dotted(expr: ast.AST) -> str | None:
    """``a.b.c`` -> "a.b.c"; ``super().m`` -> "super.m"; anything else -> None."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super":
        parts.append("super")
    else:
        return None
    return ".".join(reversed(parts))


def _message(node: ast.Raise) -> str | None:
    exc = node.exc
    if isinstance(exc, ast.Call) and exc.args:
        first = exc.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
        if isinstance(first, ast.JoinedStr):
            return "".join(v.value for v in first.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _walk_skipping(node: ast.AST, skip: tuple = ()):
    """ast.walk that does not descend into the given node types below the root."""
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        for child in ast.iter_child_nodes(cur):
            if not (skip and isinstance(child, skip)):
                stack.append(child)


def _facts(node: ast.AST, unit: Unit) -> None:
    unit.docstring = ast.get_docstring(node, clean=True) or ""
    skip = FUNCS if isinstance(node, ast.ClassDef) else ()  # a class's own facts leave its methods out
    calls, idents, messages = [], [], []
    for sub in _walk_skipping(node, skip):
        if isinstance(sub, ast.Call):
            d = dotted(sub.func)
            if d:
                calls.append(d)
        elif isinstance(sub, ast.Name):
            idents.append(sub.id)
        elif isinstance(sub, ast.Attribute):
            idents.append(sub.attr)
        elif isinstance(sub, ast.Raise):
            m = _message(sub)
            if m:
                messages.append(m)
    unit.calls = list(dict.fromkeys(calls))
    unit.identifiers = list(dict.fromkeys(idents))
    unit.messages = list(dict.fromkeys(messages))
    if isinstance(node, FUNCS):
        a = node.args
        unit.args = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls")]
        unit.args += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
        unit.signature = signature_from_ast(a)
    else:
        unit.bases = [d for d in (dotted(b) for b in node.bases) if d]
        unit.methods = [s.name for s in node.body if isinstance(s, FUNCS)]


def _make_unit(node: ast.AST, kind: str, parent: str | None, path: str, lines: list[str], fp: str) -> Unit:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    unit = Unit(kind, node.name, parent, path, start, node.end_lineno, fp)
    unit.code = "\n".join(lines[start - 1: node.end_lineno])
    first = node.body[0]
    unit.body_line, unit.body_col = first.lineno, first.col_offset
    unit.doc_end = first.end_lineno if _is_docstring(first) else 0
    _facts(node, unit)
    return unit


def _control_flow_bodies(node: ast.stmt) -> list[list[ast.stmt]]:
    bodies = [node.body]
    for name in ("orelse", "finalbody"):
        if getattr(node, name, None):
            bodies.append(getattr(node, name))
    for handler in getattr(node, "handlers", []):
        bodies.append(handler.body)
    return bodies


def extract_units(tree: ast.Module, path: str, lines: list[str]) -> list[Unit]:
    """The published unit extraction: top level first, then control-flow blocks, first key wins."""
    units: list[Unit] = []
    seen: set = set()
    qualnames: set[str] = set()  # a function and a class of one name would share a node id: first wins

    def fresh(key: tuple, qualname: str) -> bool:
        if key in seen or qualname in qualnames:
            return False
        seen.add(key)
        qualnames.add(qualname)
        return True

    def add_class(node: ast.ClassDef) -> None:
        prints = {id(sub): fingerprint(sub) for sub in node.body if isinstance(sub, FUNCS)}
        units.append(_make_unit(node, "class", None, path, lines, fingerprint(node, prints)))
        for sub in node.body:
            if isinstance(sub, FUNCS) and fresh(("method", sub.name, node.name), f"{node.name}.{sub.name}"):
                units.append(_make_unit(sub, "method", node.name, path, lines, prints[id(sub)]))

    def visit(stmts: list[ast.stmt], top: bool) -> None:
        for node in stmts:
            if isinstance(node, FUNCS) and fresh(("function", node.name, None), node.name):
                units.append(_make_unit(node, "function", None, path, lines, fingerprint(node)))
            elif isinstance(node, ast.ClassDef) and fresh(("class", node.name, None), node.name):
                add_class(node)
            if not top and isinstance(node, CONTROL_FLOW):
                for block in _control_flow_bodies(node):
                    visit(block, top=False)

    visit(tree.body, top=True)
    for node in tree.body:
        if isinstance(node, CONTROL_FLOW):
            for block in _control_flow_bodies(node):
                visit(block, top=False)
    return units


def _statements(stmts: list[ast.stmt]):
    """Every statement, also nested in functions, classes and blocks (expressions are not entered)."""
    stack = list(reversed(stmts))
    while stack:
        node = stack.pop()
        yield node
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                stack.extend(reversed([b for b in block if isinstance(b, ast.AST)]))


def _imports(tree: ast.Module, module: str, is_package: bool) -> tuple[list[Import], list[str]]:
    """Every import statement of the file (also inside functions): aliases and star imports."""
    imports, stars = [], []
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    imports.append(Import(a.asname, a.name, None))
                else:
                    imports.append(Import(a.name.split(".")[0], a.name.split(".")[0], None))
                    if "." in a.name:  # ``import a.b`` also makes a.b reachable as an attribute chain
                        imports.append(Import(a.name, a.name, None))
        elif isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module)
            for a in node.names:
                if a.name == "*":
                    stars.append(base)
                else:
                    imports.append(Import(a.asname or a.name, base, a.name))
    return imports, stars


def parse_file(path: str, source: str) -> ParsedFile:
    """Units, imports and module docstring of one file; a file that does not parse has no units."""
    module, is_package = module_name(path)
    digest = hashlib.sha1(source.encode("utf-8", errors="replace")).hexdigest()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ParsedFile(path, module, is_package, "", [], [], [], syntax_error=True, digest=digest)
    lines = source.splitlines()
    imports, stars = _imports(tree, module, is_package)
    return ParsedFile(path, module, is_package, ast.get_docstring(tree, clean=True) or "",
                      extract_units(tree, path, lines), imports, stars, digest=digest,
                      top_statements=len(tree.body))
