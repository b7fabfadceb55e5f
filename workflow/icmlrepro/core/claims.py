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
    """``metric op threshold`` over the CI; with a ``control`` (the metric on the arm where the claimed
    cause is absent), the metric must also beat the control over the whole CI of their difference."""

    metric: str
    op: str
    threshold: float | tuple[float, float]
    control: str | None = None

    def describe(self) -> str:
        if self.op == "between":
            lo, hi = self.threshold
            return f"{self.metric} in [{lo:g}, {hi:g}]"
        return f"{self.metric} {self.op} {self.threshold:g}"

    def describe_control(self) -> str:
        side = ">" if self.op in (">", ">=") else "<"
        return f"{self.metric} {side} {self.control}" if self.control else ""


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
    no_control: str | None = None
    by_construction: str | None = None

    @property
    def controls(self) -> tuple[str, ...]:
        return tuple(c.control for c in self.conditions if c.control)

    @property
    def claimed_source(self) -> str:
        return self.claimed.get("source", "abstract")


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
        return sorted({m for cl in self.claims for c in cl.conditions for m in (c.metric, c.control) if m})


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
                      tuple(d["threshold"]) if isinstance(d["threshold"], list) else float(d["threshold"]),
                      d.get("control"))
            for d in (c.get("predicate") or {}).get("all_of", [])
        )
        claim = Claim(c["id"], c["quote"], c["kind"], c["claimed"], c["setting"], conds,
                      c.get("not_testable"), c.get("metric_note", ""), c.get("no_control"),
                      c.get("by_construction"))
        if claim.by_construction and (claim.controls or claim.no_control):
            raise ClaimsError(f"{source}: claims/{claim.id}: a property that holds by construction has no "
                              "control (drop 'control'/'no_control' or 'by_construction')")
        claims.append(claim)
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
