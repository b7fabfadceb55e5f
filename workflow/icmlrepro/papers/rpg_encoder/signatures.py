"""Signatures as the reconstruction check compares them: parameter names, kinds and default presence.

One canonical form for both sides, so that a mismatch means the code really differs:
``(self, a, b=, /, c, *args, d=, **kw)`` keeps every parameter's name in order, ``/`` after the
positional-only ones, ``*`` before keyword-only ones when there is no ``*args``, ``=`` after a
parameter with a default; annotations and default values are left out (a stub need not know
them). :func:`from_ast` reads it from a ``def`` node (the RPG's metadata and the regenerated
stubs); :func:`from_runtime` from ``inspect.signature`` of the function a module really defines.
"""

from __future__ import annotations

import ast
import inspect


def _join(posonly: list[str], regular: list[str], vararg: str | None, kwonly: list[str],
          kwarg: str | None) -> str:
    parts = list(posonly)
    if posonly:
        parts.append("/")
    parts += regular
    if vararg is not None:
        parts.append(f"*{vararg}")
    elif kwonly:
        parts.append("*")
    parts += kwonly
    if kwarg is not None:
        parts.append(f"**{kwarg}")
    return f"({', '.join(parts)})"


def from_ast(args: ast.arguments) -> str:
    """Canonical signature of a ``def`` from its ``ast.arguments``."""
    positional = [*args.posonlyargs, *args.args]
    with_default = {id(a) for a in positional[len(positional) - len(args.defaults):]} if args.defaults else set()
    name = lambda a: a.arg + ("=" if id(a) in with_default else "")  # noqa: E731
    kwonly = [a.arg + ("" if d is None else "=") for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return _join([name(a) for a in args.posonlyargs], [name(a) for a in args.args],
                 args.vararg.arg if args.vararg else None, kwonly, args.kwarg.arg if args.kwarg else None)


def from_runtime(fn) -> str | None:
    """Canonical signature of a plain function at run time (None when inspect cannot give one)."""
    try:
        sig = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return None
    P = inspect.Parameter
    groups: dict = {P.POSITIONAL_ONLY: [], P.POSITIONAL_OR_KEYWORD: [], P.KEYWORD_ONLY: []}
    vararg = kwarg = None
    for p in sig.parameters.values():
        if p.kind is P.VAR_POSITIONAL:
            vararg = p.name
        elif p.kind is P.VAR_KEYWORD:
            kwarg = p.name
        else:
            groups[p.kind].append(p.name + ("" if p.default is P.empty else "="))
    return _join(groups[P.POSITIONAL_ONLY], groups[P.POSITIONAL_OR_KEYWORD], vararg, groups[P.KEYWORD_ONLY], kwarg)


def parameter_names(signature: str) -> list[str]:
    """The parameter names of a canonical signature (markers, ``=`` and ``*`` stripped)."""
    inner = signature.strip()[1:-1]
    names = [p.strip().lstrip("*").rstrip("=") for p in inner.split(",")] if inner.strip() else []
    return [n for n in names if n and n != "/"]
