"""Localization tasks from real changelog entries: each names one standard-library function.

A reference such as ``asyncio.run`` or ``email.message.Message.get_payload`` is resolved to
the unit of our standard-library graph that defines it: first at run time (import the module,
follow the attributes, read the function's ``__module__`` and ``__qualname__``, which also
follows re-exports like ``asyncio.run`` -> ``asyncio/runners.py:run``), else by a unique
suffix match of ``module.qualname`` against the graph's units. Entries whose references
resolve to exactly one function or method become tasks. The *prefixed* query is the entry with the
name masked and its qualifying prefix kept (``email.message.Message.___``, :func:`.news.mask_reference`);
the main query also masks the target's location, its file's stem and class, wherever they occur
(:func:`.leaks.mask_location`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import warnings

import pandas as pd

from .code_units import module_name
from .inventory import NEVER_IMPORT
from .leaks import mask_location
from .news import Entry, mask_reference


def _plain(obj):
    if isinstance(obj, (staticmethod, classmethod)) or inspect.ismethod(obj):
        obj = obj.__func__
    elif isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, functools.cached_property):
        obj = obj.func
    if inspect.isfunction(obj):
        try:
            return inspect.unwrap(obj)
        except ValueError:
            return obj
    return None


class Resolver:
    """Maps dotted references to unit ids of one standard-library graph."""

    def __init__(self, unit_ids: list[str]):
        self.units = set(unit_ids)
        self.module_path = {}
        self.by_dotted: dict[str, list[str]] = {}
        for uid in sorted(unit_ids):
            path, qual = uid.split(":", 1)
            mod, _ = module_name(path)
            self.module_path[mod] = path
            self.by_dotted.setdefault(f"{mod}.{qual}", []).append(uid)
        self.top_level = {m.split(".")[0] for m in self.module_path}

    def _runtime(self, ref: str) -> str | None:
        parts = ref.split(".")
        for i in range(len(parts) - 1, 0, -1):
            modname = ".".join(parts[:i])
            if parts[0] not in self.top_level or parts[0] in NEVER_IMPORT or parts[i - 1] == "__main__":
                return None
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    obj = importlib.import_module(modname)
            except BaseException:  # noqa: BLE001 - not a module (or not importable): try a shorter prefix
                continue
            try:
                for p in parts[i:]:
                    obj = inspect.getattr_static(obj, p) if inspect.isclass(obj) else getattr(obj, p)
            except AttributeError:
                return None
            fn = _plain(obj)
            if fn is None:
                return None
            path = self.module_path.get(fn.__module__)
            uid = f"{path}:{fn.__qualname__}" if path else None
            return uid if uid in self.units else None
        return None

    def _static(self, ref: str) -> str | None:
        hits = {u for dotted, uids in self.by_dotted.items()
                if dotted == ref or dotted.endswith("." + ref) for u in uids}
        return hits.pop() if len(hits) == 1 else None

    def resolve(self, ref: str) -> str | None:
        return self._runtime(ref) or self._static(ref)


def changelog_tasks(entries: list[Entry], unit_ids: list[str], sections: list[str], repo: str) -> pd.DataFrame:
    """One task per entry of the given sections whose function references resolve to one unit."""
    resolver = Resolver(unit_ids)
    rows = []
    for e in entries:
        if e.section not in sections:
            continue
        resolved = {}
        for ref in e.references():
            uid = resolver.resolve(ref)
            if uid:
                resolved.setdefault(uid, ref)
        if len(resolved) != 1:
            continue
        (uid, ref), = resolved.items()
        path, qual = uid.split(":", 1)
        name, parent = qual.split(".")[-1], (qual.rsplit(".", 1)[0] if "." in qual else None)
        prefixed = mask_reference(e.text, ref, name)
        rows.append({"task": f"{repo}#{e.issue}", "repo": repo, "gold": uid, "gold_file": path,
                     "template": "changelog", "query": mask_location(prefixed, path, parent),
                     "query_prefixed": prefixed, "removed": [], "reference": ref})
    return pd.DataFrame(rows, columns=["task", "repo", "gold", "gold_file", "template", "query", "query_prefixed",
                                       "removed", "reference"]).drop_duplicates("task").reset_index(drop=True)
