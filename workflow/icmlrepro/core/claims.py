"""The claims registry: what each paper claims, quoted from its abstract, and how it is decided.

One YAML per paper in ``resources/claims/``, validated against ``config/schema/claims.schema.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import yaml

from .io import YamlFileError, read_yaml
from .paths import claims_dir, schema_dir


class ClaimsError(ValueError):
    """A claims file does not follow the schema."""


Ref = str | float  # a metric of metrics.json (per replicate) or a fixed number


@dataclass(frozen=True)
class Condition:
    """``quantity op threshold`` over the CI; with a ``control`` (the metric on the arm where the claimed
    cause is absent), the quantity must also beat the control over the whole CI of their difference.

    The quantity is the metric itself, or, computed per replicate so that the arms' shared seed-to-seed
    spread cancels: ``metric - minus`` (e.g. a fine-tuned arm minus the base model), or its position
    ``(metric - floor) / (ceiling - floor)`` between a trivial reference and a ceiling, each a metric of
    the same run or a fixed number (chance level, a perfect score)."""

    metric: str
    op: str
    threshold: float | tuple[float, float]
    control: str | None = None
    minus: str | None = None
    floor: Ref | None = None
    ceiling: Ref | None = None

    @property
    def quantity(self) -> str:
        if self.minus:
            return f"{self.metric} − {self.minus}"
        if self.floor is not None:
            return f"({self.metric} − {_ref(self.floor)}) / ({_ref(self.ceiling)} − {_ref(self.floor)})"
        return self.metric

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric of metrics.json the condition reads."""
        return tuple(m for m in (self.metric, self.control, self.minus, self.floor, self.ceiling)
                     if isinstance(m, str))

    @property
    def threshold_text(self) -> str:
        """``in [lo, hi]`` or ``op threshold``."""
        if self.op == "between":
            lo, hi = self.threshold
            return f"in [{lo:g}, {hi:g}]"
        return f"{self.op} {self.threshold:g}"

    def describe(self) -> str:
        return f"{self.quantity} {self.threshold_text}"

    def describe_control(self) -> str:
        side = ">" if self.op in (">", ">=") else "<"
        return f"{self.metric} {side} {self.control}" if self.control else ""


@dataclass(frozen=True)
class Gate:
    """A calibration condition of a paper's miniature (the main baseline between its trivial reference and
    the ceiling, an arm that learned something): claims that rely on it are judged only when it holds."""

    id: str
    why: str
    conditions: tuple[Condition, ...]
    scales: tuple[str, ...] | None = None  # the scales it applies at (None: every scale)

    def applies(self, scale: str | None) -> bool:
        """Whether the gate is judged at ``scale`` (a workload that only some scales run, e.g. a real-graph
        source absent at smoke, is gated where it runs)."""
        return self.scales is None or scale is None or scale in self.scales


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
    gates: tuple[str, ...] | None = None  # gate ids it relies on; None: every gate of its paper

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
    gates: tuple[Gate, ...] = ()

    def metrics_needed(self, scale: str | None = None) -> list[str]:
        """Every metric its predicates and the gates that apply at ``scale`` read (None: every gate)."""
        conds = [c for cl in self.claims for c in cl.conditions]
        conds += [c for g in self.gates if g.applies(scale) for c in g.conditions]
        return sorted({m for c in conds for m in c.metrics})

    def gates_of(self, claim: Claim) -> tuple[Gate, ...]:
        """The gates a claim relies on: those it names, else every gate of the paper; a property that
        holds by construction relies on none unless it names them (no calibration can make it hold)."""
        if claim.gates is None:
            return () if claim.by_construction else self.gates
        return tuple(g for g in self.gates if g.id in claim.gates)


def claims_schema() -> dict:
    return yaml.safe_load((schema_dir() / "claims.schema.yaml").read_text())


def parse_claims(raw: dict, source: str = "<claims>") -> PaperClaims:
    try:
        jsonschema.validate(raw, claims_schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ClaimsError(f"{source}: {where}: {exc.message}") from None
    gates = tuple(Gate(g["id"], g["why"], _conditions(g["all_of"]), tuple(g["scales"]) if "scales" in g else None)
                  for g in raw.get("gates", []))
    gate_ids = [g.id for g in gates]
    if len(set(gate_ids)) != len(gate_ids):
        raise ClaimsError(f"{source}: gates: duplicate gate ids {sorted(gate_ids)}")
    claims = []
    for c in raw["claims"]:
        claim = Claim(c["id"], c["quote"], c["kind"], c["claimed"], c["setting"],
                      _conditions((c.get("predicate") or {}).get("all_of", [])),
                      c.get("not_testable"), c.get("metric_note", ""), c.get("no_control"),
                      c.get("by_construction"), tuple(c["gates"]) if "gates" in c else None)
        if claim.by_construction and (claim.controls or claim.no_control):
            raise ClaimsError(f"{source}: claims/{claim.id}: a property that holds by construction has no "
                              "control (drop 'control'/'no_control' or 'by_construction')")
        unknown = [g for g in claim.gates or () if g not in gate_ids]
        if unknown:
            raise ClaimsError(f"{source}: claims/{claim.id}: gates {unknown} are not defined under 'gates' "
                              f"(defined: {gate_ids})")
        claims.append(claim)
    return PaperClaims(raw["paper"], raw["title"], raw["abstract_start"], raw["setting"], tuple(claims),
                       raw.get("code"), raw.get("scale_gap", ""), tuple(raw.get("assumptions", [])), gates)


def _ref(x: Ref | None) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def _conditions(raw: list[dict]) -> tuple[Condition, ...]:
    def ref(x):
        return x if x is None or isinstance(x, str) else float(x)

    return tuple(
        Condition(d["metric"], d["op"],
                  tuple(d["threshold"]) if isinstance(d["threshold"], list) else float(d["threshold"]),
                  d.get("control"), d.get("minus"), ref(d.get("floor")), ref(d.get("ceiling")))
        for d in raw)


def load_claims(paper: str, directory: Path | None = None) -> PaperClaims:
    path = (directory or claims_dir()) / f"{paper}.yaml"
    try:
        raw = read_yaml(path)
    except YamlFileError as exc:
        raise ClaimsError(str(exc)) from None
    pc = parse_claims(raw, str(path))
    if pc.paper != paper:
        raise ClaimsError(f"{path}: 'paper' is {pc.paper!r}, expected {paper!r} (the file name)")
    return pc


def all_papers(directory: Path | None = None) -> list[str]:
    """Every paper in the registry (one per claims file), sorted."""
    return sorted(p.stem for p in (directory or claims_dir()).glob("*.yaml"))


def load_all_claims(directory: Path | None = None) -> dict[str, PaperClaims]:
    return {p: load_claims(p, directory) for p in all_papers(directory)}
