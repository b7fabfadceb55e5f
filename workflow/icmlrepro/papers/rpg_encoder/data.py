"""Stage ``data``: everything real that the experiment reads, collected from this machine, offline.

Writes the sources of the repositories, a runtime inventory of what their modules define (the
coverage reference), the Library entries of the CPython changelog when the file is present,
and the releases replayed by the evolution experiment. A provenance record says what was found
(Python version, stdlib location, changelog, release versions, modules that did not import).
"""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

import pandas as pd

from icmlrepro.core.io import write_json, write_parquet

from . import sources as S
from .code_units import module_name
from .inventory import Entity, module_entities
from .news import parse_entries, read_news


def repository_sources(p) -> pd.DataFrame:
    rows = []
    for repo in p["repos"]:
        tree = S.repository(repo, p["stdlib_include"] if repo == "stdlib" else None)
        if not tree:
            raise ValueError(f"rpg_encoder: repository {repo!r} has no Python files here")
        rows += [{"repo": repo, "path": path, "source": src} for path, src in sorted(tree.items())]
    return pd.DataFrame(rows)


def inventory(src: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    rows, failed = [], {}
    for r in src.itertuples(index=False):
        module, _ = module_name(r.path)
        entities, err = module_entities(module, r.path, r.source)
        if err:
            failed[f"{r.repo}:{module}"] = err
        rows += [{"repo": r.repo, **dataclasses.asdict(e)} for e in entities]
    return pd.DataFrame(rows, columns=["repo", *(f.name for f in dataclasses.fields(Entity))]), failed


def changelog_entries(p) -> tuple[pd.DataFrame, str | None]:
    path = p["news"]
    cols = ["issue", "section", "text"]
    if not path or not Path(path).exists():
        return pd.DataFrame(columns=cols), None
    entries = [e for e in parse_entries(read_news(path)) if e.section in p["news_sections"]]
    return pd.DataFrame([{"issue": e.issue, "section": e.section, "text": e.text} for e in entries], columns=cols), path


def releases(p) -> tuple[pd.DataFrame, dict]:
    """The release series (pinned wheels) and the vendored copies, one row per file of each version."""
    ev = p["releases"]
    where = S.releases_dir(ev["releases_dir"])
    rows, found = [], {}
    for package, versions in sorted(ev["series"].items()):
        copies = S.wheel_copies(package, versions, where)
        found[f"series:{package}"] = [c.version for c in copies]
        rows += _copy_rows("series", package, copies)
    for package in ev["vendored"]:
        copies = S.release_copies(package)
        found[f"vendored:{package}"] = [f"{c.version} ({c.origin})" for c in copies]
        rows += _copy_rows("vendored", package, copies if len(copies) > 1 else [])
    return pd.DataFrame(rows, columns=["kind", "package", "order", "version", "origin", "path", "source"]), found


def _copy_rows(kind: str, package: str, copies) -> list[dict]:
    return [{"kind": kind, "package": package, "order": i, "version": c.version, "origin": c.origin,
             "path": path, "source": src}
            for i, c in enumerate(copies) for path, src in sorted(c.sources().items())]


def run(job) -> None:
    p = job.params
    src = repository_sources(p)
    inv, failed = inventory(src)
    entries, news_path = changelog_entries(p)
    rel, found = releases(p)
    write_parquet(job.output.sources, src)
    write_parquet(job.output.inventory, inv)
    write_parquet(job.output.entries, entries)
    write_parquet(job.output.releases, rel)
    write_json(job.output.provenance, {
        "python": platform.python_version(), "stdlib": str(S.stdlib_dir()),
        "files": src.groupby("repo").size().to_dict(), "inventory": inv.groupby("repo").size().to_dict(),
        "modules_not_imported": failed, "changelog": news_path, "changelog_entries": len(entries),
        "releases_dir": str(S.releases_dir(p["releases"]["releases_dir"])), "releases": found,
    })
