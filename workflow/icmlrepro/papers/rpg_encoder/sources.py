"""Real repositories that are on every machine with the pipeline's environment, found offline.

* ``stdlib``: the standard library of the Python that runs the pipeline (its ``Lib`` directory),
  without tests, GUI packages (idlelib, tkinter, turtle), deprecated or generated parts
  (lib2to3, distutils, the ``encodings`` codec tables, ``pydoc_data``), bundled wheels and
  third-party ``site-packages``.
* any installed pure-Python package by import name (``packaging``, ``jinja2``, ``networkx``...).
* consecutive releases of a small package, as wheels that the set-up script downloads once
  (pinned with hashes in ``envs/rpg_encoder_releases.txt``), read straight from the zip files.
* other releases of a package: pip and setuptools vendor copies of packages that are also
  installed in their own right, each at the version its vendoring pinned (pip's
  ``_vendor/vendor.txt``, setuptools' ``_vendor/*.dist-info``). Ordered by version, consecutive
  copies are real differences between two releases. The vendoring rewrites absolute imports
  (``import platformdirs`` -> ``from pip._vendor import platformdirs``); that rewrite is undone
  so that only the releases' own changes remain.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from icmlrepro.core.paths import repo_root

SKIP_DIRS = frozenset({"test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo", "lib2to3", "site-packages",
                       "dist-packages", "ensurepip", "__pycache__", "distutils", "encodings", "pydoc_data",
                       "__phello__"})
SKIP_FILES = frozenset({"antigravity.py", "this.py", "__hello__.py", "turtle.py"})
VENDORS = ("pip", "setuptools")
_VENDOR_FROM = re.compile(r"\bfrom\s+(?:pip|setuptools)\._vendor\s+import\s+")
_VENDOR_DOT = re.compile(r"\b(?:pip|setuptools)\._vendor\.")


def _skip_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(("config-", "."))


def read_tree(base: Path, top: str | None = None) -> dict[str, str]:
    """``{relative path: source}`` of the .py files under ``base/top`` (test files and skipped dirs left out)."""
    start = base / top if top else base
    out = {}
    for root, dirs, files in os.walk(start):
        dirs[:] = sorted(d for d in dirs if not _skip_dir(d))
        for f in sorted(files):
            if f.endswith(".py") and not f.startswith("test_") and f not in SKIP_FILES:
                p = Path(root) / f
                out[p.relative_to(base).as_posix()] = p.read_text(encoding="utf-8", errors="replace")
    return out


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def package_dir(name: str) -> Path:
    """The directory holding package ``name`` (its parent is the import root), without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"rpg_encoder: {name!r} is not an installed package (a directory with __init__.py)")
    return Path(list(spec.submodule_search_locations)[0])


def repository(name: str, stdlib_include: list[str] | None = None) -> dict[str, str]:
    """The sources of one repository: ``stdlib`` (optionally only some top-level modules) or a package."""
    if name == "stdlib":
        tree = read_tree(stdlib_dir())
        if stdlib_include:
            keep = set(stdlib_include)
            tree = {p: s for p, s in tree.items() if p.split("/")[0].removesuffix(".py") in keep}
        return tree
    pkg = package_dir(name)
    return read_tree(pkg.parent, pkg.name)


# --- other releases --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Copy:
    package: str
    version: str
    origin: str  # "wheel" | "installed" | "pip" | "setuptools"
    location: Path  # the package directory, or the wheel file

    def sources(self) -> dict[str, str]:
        """``{path: source}`` of the copy's .py files (tests left out), vendoring undone."""
        if self.origin == "wheel":
            with zipfile.ZipFile(self.location) as zf:
                names = [n for n in zf.namelist() if n.endswith(".py") and n.startswith(f"{self.package}/")]
                tree = {n: zf.read(n).decode("utf-8", errors="replace") for n in sorted(names)
                        if not any(_skip_dir(d) for d in n.split("/")[:-1])
                        and not n.rsplit("/", 1)[-1].startswith("test_")}
        else:
            tree = read_tree(self.location.parent, self.location.name)
        return {p: devendor(s) for p, s in tree.items()}


def releases_dir(configured: str | None = None) -> Path:
    """Where the set-up script put the release wheels: ``$VENV/rpg_encoder_releases`` of the running
    environment, else of the checkout's ``.venv`` (e.g. when jobs run in a conda environment)."""
    if configured:
        return Path(configured)
    for candidate in (Path(sys.prefix) / "rpg_encoder_releases", repo_root() / ".venv" / "rpg_encoder_releases"):
        if candidate.is_dir():
            return candidate
    return Path(sys.prefix) / "rpg_encoder_releases"


def wheel_copies(package: str, versions: list[str], directory: Path) -> list[Copy]:
    """The pinned release wheels of ``package``, in the given order; [] if any is missing."""
    copies = []
    for v in versions:
        found = sorted(directory.glob(f"{package}-{v}-*.whl")) if directory.is_dir() else []
        if not found:
            return []
        copies.append(Copy(package, v, "wheel", found[0]))
    return copies


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _site_packages() -> Path | None:
    spec = importlib.util.find_spec("pip") or importlib.util.find_spec("setuptools")
    return Path(spec.origin).parent.parent if spec and spec.origin else None


def _vendored_versions(site: Path, vendor: str) -> dict[str, str]:
    root = site / vendor / "_vendor"
    versions = {}
    if vendor == "pip" and (root / "vendor.txt").exists():
        for line in (root / "vendor.txt").read_text().splitlines():
            m = re.match(r"\s*([A-Za-z0-9_.\-]+)==([^\s#;]+)", line)
            if m:
                versions[_norm(m.group(1))] = m.group(2)
        if "setuptools" in versions:
            versions["pkg_resources"] = versions["setuptools"]  # pip vendors setuptools' pkg_resources
    elif root.is_dir():
        for d in root.glob("*.dist-info"):
            m = re.match(r"(.+?)-([0-9][^-]*)\.dist-info$", d.name)
            if m:
                versions[_norm(m.group(1))] = m.group(2)
    return versions


def _installed_version(package: str) -> str | None:
    dists = importlib.metadata.packages_distributions().get(package, [])
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def release_copies(package: str) -> list[Copy]:
    """All copies of ``package`` on disk with a known version, one per version, oldest first.

    An installed copy is preferred to a vendored one of the same version.
    """
    site = _site_packages()
    found: dict[str, Copy] = {}
    try:
        pkg = package_dir(package)
        if pkg.parent == site:
            version = _installed_version(package)
            if version:
                found[version] = Copy(package, version, "installed", pkg)
    except FileNotFoundError:
        pass
    for vendor in VENDORS:
        if site is None:
            break
        d = site / vendor / "_vendor" / package
        version = _vendored_versions(site, vendor).get(_norm(package))
        if d.is_dir() and version and version not in found:
            found[version] = Copy(package, version, vendor, d)

    def key(v: str):
        try:
            return (0, Version(v))
        except InvalidVersion:
            return (1, v)

    return [found[v] for v in sorted(found, key=key)]


def devendor(source: str) -> str:
    """Undo the vendoring rewrite of absolute imports."""
    return _VENDOR_DOT.sub("", _VENDOR_FROM.sub("import ", source))


