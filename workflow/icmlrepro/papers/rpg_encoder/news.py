"""Real issue texts: the CPython changelog (``NEWS``) entries of the Library section.

Each entry (``- gh-issue-101372: Fix :func:`~unicodedata.is_normalized` to ...``) is a fix
written by a CPython developer for a reported issue. An entry that names exactly one standard
library function or method (by a ``:func:``/``:meth:`` role, resolved to a unit of our
standard-library graph) becomes a localization task: the query is the entry text with that
name masked out, the gold answer is the function and its file.

The file ships with Debian's ``python3.11`` package (``/usr/share/doc/python3.11/NEWS.gz``);
where it is absent the pipeline falls back to synthetic tasks (see :mod:`.tasks`).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

from .text import split_identifier

ENTRY = re.compile(r"^- ((?:gh-issue|gh|bpo)-\d+|Issue #\d+): (.*)")
ROLE = re.compile(r":(?:func|meth):`([~!.]*)([A-Za-z_][\w.]*?)(?:\(\))?`")
ANY_ROLE = re.compile(r":[a-z:]+:`([^`]*)`")
MASK = "___"


@dataclass(frozen=True)
class Entry:
    issue: str
    section: str
    text: str

    def references(self) -> list[str]:
        """Dotted names in ``:func:``/``:meth:`` roles, without ``~``, leading dots or ``()``."""
        return list(dict.fromkeys(m.group(2) for m in ROLE.finditer(self.text)))


def read_news(path: str | Path) -> str:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def parse_entries(text: str) -> list[Entry]:
    """All bulleted entries with their section heading (the line above a ``-----`` rule)."""
    lines = text.splitlines()
    entries, section, cur = [], "", None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and line.strip() and re.fullmatch(r"-{3,}", lines[i + 1].strip()):
            section = line.strip()
        m = ENTRY.match(line)
        if m:
            if cur:
                entries.append(Entry(*cur))
            cur = [m.group(1), section, m.group(2)]
        elif cur and line.startswith("  ") and line.strip():
            cur[2] += " " + line.strip()
        elif cur:
            entries.append(Entry(*cur))
            cur = None
    if cur:
        entries.append(Entry(*cur))
    return entries


def mask_reference(text: str, reference: str, name: str) -> str:
    """The entry with the target masked: its role keeps the qualifying prefix (``json.___``),
    and every other word carrying one of the name's word tokens is masked too."""
    def role(m: re.Match) -> str:
        ref = m.group(1).lstrip("~!.").removesuffix("()")
        if ref == reference or ref.split(".")[-1] == name:
            prefix = ref.rsplit(".", 1)[0] + "." if "." in ref else ""
            return prefix + MASK
        return ref
    plain = ANY_ROLE.sub(role, text).replace("``", "")
    return mask_words(plain, name)


def mask_words(text: str, name: str) -> str:
    """Mask every word that is the name or shares a word token with it (``get_payload`` masks
    ``payload`` and ``get``), so that no index token of the name survives in the query."""
    banned = set(split_identifier(name)) or {name.lower()}

    def word(m: re.Match) -> str:
        w = m.group(0)
        return MASK if w == name or banned & set(split_identifier(w)) else w

    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", word, text)
