"""The claims registry: what each paper claims, quoted from its abstract, and how it is decided.

One YAML per paper in ``resources/claims/``, validated against ``config/schema/claims.schema.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import yaml

from .paths import claims_dir, schema_dir


class ClaimsError(ValueError):
    """A claims file does not follow the schema."""


@dataclass(frozen=True)
class Condition:
    metric: str
    op: str
    threshold: float | tuple[float, float]

    def describe(self) -> str:
        if self.op == "between":
            lo, hi = self.threshold
            return f"{self.metric} in [{lo:g}, {hi:g}]"
        return f"{self.metric} {self.op} {self.threshold:g}"


@dataclass(frozen=True)
class Claim:
    id: str
    quote: str
    kind: str
    claimed: dict
    setting: str
    conditions: tuple[Condition, ...] = ()
    not_testable: str | None = None
    metric_note: str = ""


@dataclass(frozen=True)
class PaperClaims:
    paper: str
    title: str
    abstract_start: str
    setting: str
    claims: tuple[Claim, ...]
    code: str | None = None
    scale_gap: str = ""
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    def metrics_needed(self) -> list[str]:
        return sorted({c.metric for cl in self.claims for c in cl.conditions})


def claims_schema() -> dict:
    return yaml.safe_load((schema_dir() / "claims.schema.yaml").read_text())


def parse_claims(raw: dict, source: str = "<claims>") -> PaperClaims:
    try:
        jsonschema.validate(raw, claims_schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ClaimsError(f"{source}: {where}: {exc.message}") from None
    claims = []
    for c in raw["claims"]:
        conds = tuple(
            Condition(d["metric"], d["op"],
                      tuple(d["threshold"]) if isinstance(d["threshold"], list) else float(d["threshold"]))
            for d in (c.get("predicate") or {}).get("all_of", [])
        )
        claims.append(Claim(c["id"], c["quote"], c["kind"], c["claimed"], c["setting"], conds,
                            c.get("not_testable"), c.get("metric_note", "")))
    return PaperClaims(raw["paper"], raw["title"], raw["abstract_start"], raw["setting"], tuple(claims),
                       raw.get("code"), raw.get("scale_gap", ""), tuple(raw.get("assumptions", [])))


def load_claims(paper: str, directory: Path | None = None) -> PaperClaims:
    path = (directory or claims_dir()) / f"{paper}.yaml"
    pc = parse_claims(yaml.safe_load(path.read_text()), str(path))
    if pc.paper != paper:
        raise ClaimsError(f"{path}: 'paper' is {pc.paper!r}, expected {paper!r} (the file name)")
    return pc


def all_papers(directory: Path | None = None) -> list[str]:
    """Every paper in the registry (one per claims file), sorted."""
    return sorted(p.stem for p in (directory or claims_dir()).glob("*.yaml"))


def load_all_claims(directory: Path | None = None) -> dict[str, PaperClaims]:
    return {p: load_claims(p, directory) for p in all_papers(directory)}
