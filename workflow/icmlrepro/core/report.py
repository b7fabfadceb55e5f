"""The HTML report: claims beside measured numbers, with computed verdicts, figures and provenance.

One self-contained file per scale (figures embedded as data URIs, lazily decoded; one small inline
script for the verdict filter and for opening a paper's section from the summary; no network),
rendered with jinja2 with autoescaping. It covers every paper of the claims registry; papers
that were not configured or have no metrics yet show every claim as ``not run``. A stated number is
shown beside the measurement only when both are in the same unit.
"""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import pandas as pd
from markupsafe import Markup, escape

from . import verdicts as V
from .claims import PaperClaims, load_all_claims
from .io import atomic_path, read_json
from .metrics import MetricsError, MetricsFile, load_metrics
from .paths import repo_root
from .power import N_CAP
from .provenance import collect
from .tuning import edge_flag


@dataclass
class PaperSection:
    claims: PaperClaims
    results: list[V.ClaimResult]
    status: str  # "run" | "not configured" | "not implemented"
    figures: list[dict] = field(default_factory=list)
    benchmarks: list[dict] = field(default_factory=list)
    seeds: list = field(default_factory=list)
    replicate: str = "seed"
    units: dict[str, str] = field(default_factory=dict)  # metric -> unit, from metrics.json
    tuning: list[dict] = field(default_factory=list)  # tuned settings and how often each sat at a grid edge
    gates: list[V.GateResult] = field(default_factory=list)  # the paper's calibration gates, judged

    @property
    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in V.VERDICTS}
        for r in self.results:
            out[r.verdict] += 1
        return out

    @property
    def blocked(self) -> int:
        """Claims that read "not testable at this scale" because a gate they rely on did not hold."""
        return sum(bool(r.blocked_by) for r in self.results)

    @property
    def decided_share(self) -> float:
        """The share of this paper's claims that were decided (NaN when it did not run): the grid's last column."""
        if self.status != "run" or not self.results:
            return math.nan
        return sum(bool(r.decided) for r in self.results) / len(self.results)

    def claimed_comparable(self, claim) -> bool:
        """Whether the claim's stated number may sit beside the measurement: same unit as the metric of
        its first condition (before a run, the number stands alone and is shown)."""
        if claim.claimed.get("value") is None or not claim.conditions or not self.units:
            return True
        unit = self.units.get(claim.conditions[0].metric, "")
        return (claim.claimed.get("unit") or "").strip().lower() == unit.strip().lower()


def fmt(x: float, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "NaN"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}g}"


def breakable(name: str) -> Markup:
    """An identifier that a narrow column may wrap after ``_`` or ``.`` and nowhere else: the browser otherwise
    either overflows the cell or (with ``overflow-wrap: anywhere``) breaks it letter by letter ("ris k_co ntro l")."""
    return Markup("").join(Markup(escape(part)) + (Markup("<wbr>") if part in "_." else Markup(""))
                           for part in re.split(r"([_.])", str(name)) if part)


def verdict_class(verdict: str) -> str:
    return "v-" + verdict.replace(" ", "-")


def read_benchmarks(results_dir: Path, paper: str) -> list[dict]:
    """Per-job wall time and peak memory from Snakemake's ``benchmark:`` files."""
    rows = []
    base = results_dir / paper / "benchmarks"
    for f in sorted(base.rglob("*.tsv")):
        try:
            df = pd.read_csv(f, sep="\t")
        except Exception:  # a benchmark file is informative only; an unreadable one is shown as such
            rows.append({"job": str(f.relative_to(base)), "s": "unreadable", "max_rss": ""})
            continue
        rows.append({"job": str(f.relative_to(base).with_suffix("")),
                     "s": fmt(float(df["s"].iloc[-1]), 3),
                     "max_rss": fmt(float(df["max_rss"].iloc[-1]), 4) if "max_rss" in df else ""})
    return rows


def tuning_edges(metrics: MetricsFile) -> list[dict]:
    """Every tuned setting's grid-edge flag (``core.tuning``), as the share of replicates whose pick sat
    at an edge of its grid (NaN replicates left out)."""
    rows = []
    for name, m in sorted(metrics.metrics.items()):
        flags = [f for f in (edge_flag(name, v) for v in m.values) if f is not None and not math.isnan(f)]
        if flags:
            rows.append({"metric": name, "edge_share": sum(flags) / len(flags), "n": len(flags),
                         "at_edge": any(f > 0 for f in flags)})
    return rows


def figure_entry(path: Path) -> dict:
    data = path.read_bytes()
    return {"name": path.stem.replace("_", " "), "file": path.name,
            "src": "data:image/png;base64," + base64.b64encode(data).decode()}


def build_sections(scale: str, papers: list[str], inputs: dict, results_dir: Path,
                   ci_level: float, ci_method: str, claims_dir: Path | None = None,
                   errors: list[str] | None = None) -> list[PaperSection]:
    """One section per paper of the claims registry; ``errors``: see :func:`sections_from_results`."""
    sections = []
    for paper, pc in load_all_claims(claims_dir).items():
        metrics_path = inputs.get(f"{paper}__metrics")
        metrics: MetricsFile | None = load_metrics(metrics_path) if metrics_path else None
        if metrics is not None and (metrics.paper != paper or metrics.scale != scale):
            raise ValueError(
                f"{metrics_path}: holds paper {metrics.paper!r} at scale {metrics.scale!r}, "
                f"expected {paper!r} at {scale!r}")
        status = "run" if metrics else ("not configured" if paper not in papers else "not implemented")
        try:
            gates = V.judge_gates(pc, metrics, level=ci_level, method=ci_method)  # judged once, shown and applied
            sec = PaperSection(pc, V.judge_paper(pc, metrics, gates, level=ci_level, method=ci_method), status)
        except MetricsError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
            continue
        sec.gates = list(gates.values())
        if metrics:
            figs = sorted(k for k in inputs if k.startswith(f"{paper}__figure"))
            sec.figures = [figure_entry(Path(inputs[k])) for k in figs]
            sec.benchmarks = read_benchmarks(results_dir, paper)
            sec.seeds = metrics.replicates
            sec.replicate = metrics.replicate
            sec.units = {k: m.unit for k, m in metrics.metrics.items()}
            sec.tuning = tuning_edges(metrics)
        sections.append(sec)
    return sections


def verdict_totals(sections: list[PaperSection]) -> dict[str, int]:
    return {v: sum(s.counts[v] for s in sections) for v in V.VERDICTS}


def decision_summary(sections: list[PaperSection]) -> dict:
    """The share of the claims of papers that ran that were decided, the claims a gate blocked, and the seeds each
    undecided claim would need (``core.power``)."""
    ran = [(s, r) for s in sections if s.status == "run" for r in s.results]
    decided = [r for _, r in ran if r.decided]
    undecided = [{"paper": s.claims.paper, "claim": r.claim.id, "n": max((c.summary.n for c in r.conditions),
                                                                         default=0),
                  "n_star": r.n_star, "note": r.n_star_note}
                 for s, r in ran if r.verdict == V.INCONCLUSIVE]
    return {"ran": len(ran), "decided": len(decided),
            "share": len(decided) / len(ran) if ran else math.nan,
            "blocked": sum(bool(r.blocked_by) for _, r in ran),
            "declared_not_testable": sum(r.verdict == V.NOT_TESTABLE and not r.blocked_by for _, r in ran),
            "undecided": sorted(undecided, key=lambda u: (u["n_star"] is None, u["n_star"] or 0))}


def text_summary(sections: list[PaperSection]) -> str:
    """The gates and verdicts as plain text, one line each (``python -m icmlrepro verdicts``)."""
    lines = []
    for s in sections:
        lines.append(f"== {s.claims.paper} ({s.status})")
        for g in s.gates:
            lines.append(f"  gate {g.gate.id}: {g.state}" + ("" if g.state == "holds" else f" - {g.reason}")
                         + (f"; n*: {g.n_star_note}" if g.n_star_note else "")
                         + "".join(f"\n    {c.condition.describe()}: {fmt(c.summary.mean)} "
                                   f"[{fmt(c.summary.lo)}, {fmt(c.summary.hi)}] {c.state}" for c in g.conditions))
        for r in s.results:
            extra = f" (ungated: {r.ungated})" if r.blocked_by else ""
            extra += f"; n*: {r.n_star_note}" if r.n_star_note else ""
            lines.append(f"  {r.claim.id}: {r.verdict}{extra}")
    d = decision_summary(sections)
    totals = verdict_totals(sections)
    lines.append("totals: " + ", ".join(f"{v} {n}" for v, n in totals.items()))
    lines.append(f"decided {d['decided']} of {d['ran']} that ran; blocked by a gate {d['blocked']}; "
                 f"declared not testable {d['declared_not_testable']}; inconclusive {len(d['undecided'])}")
    return "\n".join(lines)


def sections_from_results(scale: str, results_dir: Path, ci_level: float = 0.95, ci_method: str = "t",
                          claims_dir: Path | None = None, errors: list[str] | None = None) -> list[PaperSection]:
    """Sections for every paper whose ``metrics.json`` exists under ``results_dir`` (no figures). With
    ``errors`` (a list), a paper whose metrics and claims disagree (a run of older code, a paper being reworked)
    is left out and its error appended, so the other papers are still judged; without it the error is raised."""
    papers = sorted(p.parent.name for p in results_dir.glob("*/metrics.json"))
    inputs = {f"{p}__metrics": str(results_dir / p / "metrics.json") for p in papers}
    return build_sections(scale, papers, inputs, results_dir, ci_level, ci_method, claims_dir, errors)


def render(sections: list[PaperSection], scale: str, provenance: dict, template: Path, ci_level: float,
           ci_method: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(template.parent)),
                             autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = fmt
    env.filters["vclass"] = verdict_class
    env.filters["breakable"] = breakable
    totals = verdict_totals(sections)
    return env.get_template(template.name).render(
        sections=sections, scale=scale, prov=provenance, verdicts=V.VERDICTS, totals=totals,
        ci_level=ci_level, ci_method=ci_method, decision=decision_summary(sections), n_cap=N_CAP)


def run(job) -> None:
    p = job.params
    cfg = p["config"]
    ci_level, ci_method = cfg["verdicts"]["ci_level"], cfg["verdicts"]["ci_method"]
    sections = build_sections(p["scale"], p["papers"], dict(job.input), Path(p["results_dir"]),
                              ci_level, ci_method)
    prov = collect(repo_root(), cfg)
    if "device" in job.input:
        prov["gpu_rule_device"] = read_json(job.input.device)
    html = render(sections, p["scale"], prov, Path(p["template"]), ci_level, ci_method)
    with atomic_path(job.output.html) as tmp:
        tmp.write_text(html)
