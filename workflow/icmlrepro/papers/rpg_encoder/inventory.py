"""What a repository's modules really define, read at run time: the ground truth of coverage.

The paper measures how much of the original repository a representation lets one rebuild. The
miniature's reference list is independent of the encoder's parser: each module is imported and
every function, class and method whose ``__module__`` is that module (functions and methods
also with their code in that very file; ``<locals>`` excluded) is listed, with whether it
carries its own docstring. Nested classes, functions made inside conditional class bodies and
classes built by factories (``namedtuple``) are all in this list; whatever the AST-based
encoder misses counts against its coverage.

Importing runs module code, so modules with visible side effects (opening a browser, printing)
are never imported; a module that fails to import is reported, not guessed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import os
import re
import warnings
from dataclasses import dataclass

from .signatures import from_runtime as signature_at_runtime

NEVER_IMPORT = frozenset({"antigravity", "this", "__hello__", "__phello__", "idlelib", "tkinter", "turtle",
                          "turtledemo", "__main__"})


@dataclass(frozen=True)
class Entity:
    path: str
    qualname: str
    kind: str  # "class" | "function" (methods are functions with a dotted qualname)
    documented: bool
    signature: str = ""  # canonical parameter list of a function at run time (:mod:`.signatures`)
    docstring: str = ""  # its own docstring: all that a documentation-only representation has


def _own_function(obj, module: str, filename: str):
    """The plain function behind a descriptor if it was written in this file, else None."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    elif isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, functools.cached_property):
        obj = obj.func
    if not inspect.isfunction(obj):
        return None
    try:
        obj = inspect.unwrap(obj)
    except ValueError:  # a cycle of __wrapped__
        return None
    if not inspect.isfunction(obj) or obj.__module__ != module or "<locals>" in obj.__qualname__:
        return None
    if os.path.realpath(obj.__code__.co_filename) != filename:
        return None  # generated code (dataclass __init__, exec) or code written elsewhere
    return obj


def _function_entity(path: str, fn) -> Entity:
    doc = fn.__doc__ if isinstance(fn.__doc__, str) else ""
    return Entity(path, fn.__qualname__, "function", bool(doc), signature_at_runtime(fn) or "", doc)


def _written_here(cls, source: str) -> bool:
    """A ``class <name>`` statement for it in the file's text (C types and factory-made classes
    such as ``namedtuple`` results claim the module too, but have no code there)."""
    return re.search(rf"^[ \t]*class[ \t]+{re.escape(cls.__name__)}\b", source, re.MULTILINE) is not None


def _class_entities(cls, module: str, filename: str, path: str, out: dict, source: str) -> None:
    if not _written_here(cls, source):
        return
    doc = cls.__dict__.get("__doc__")
    doc = doc if isinstance(doc, str) else ""
    out[(path, cls.__qualname__)] = Entity(path, cls.__qualname__, "class", bool(doc), "", doc)
    for name, val in vars(cls).items():
        if inspect.isclass(val) and val.__module__ == module and val.__qualname__ == f"{cls.__qualname__}.{name}":
            _class_entities(val, module, filename, path, out, source)
            continue
        fn = _own_function(val, module, filename)
        if fn is not None and fn.__qualname__ == f"{cls.__qualname__}.{name}":
            out.setdefault((path, fn.__qualname__), _function_entity(path, fn))


def module_entities(module_name: str, path: str, source: str) -> tuple[list[Entity], str | None]:
    """The entities one module (file ``path`` with text ``source``) defines, or ([], reason)."""
    parts = module_name.split(".")
    if parts[0] in NEVER_IMPORT or parts[-1] == "__main__":
        return [], "never imported (side effects)"
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            mod = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - any import failure (also SystemExit) means "not importable here"
        return [], f"{type(exc).__name__}: {exc}"[:200]
    filename = os.path.realpath(getattr(mod, "__file__", "") or "")
    out: dict = {}
    for name, val in vars(mod).items():
        if inspect.isclass(val) and val.__module__ == module_name and val.__qualname__ == name:
            _class_entities(val, module_name, filename, path, out, source)
        else:
            fn = _own_function(val, module_name, filename)
            if fn is not None and fn.__qualname__ == name:
                out.setdefault((path, name), _function_entity(path, fn))
    return sorted(out.values(), key=lambda e: e.qualname), None
