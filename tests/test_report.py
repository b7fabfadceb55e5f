"""The HTML report: a row per claim of every paper, verdict classes that match the computed verdicts,
images that decode, escaping of untrusted text, and partial runs shown as not run."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup
from PIL import Image

from icmlrepro.core import verdicts as V
from icmlrepro.core.claims import load_all_claims, load_claims
from icmlrepro.core.metrics import load_metrics
from icmlrepro.core.report import build_sections, render

from .conftest import ROOT, figure_files, snakemake


@pytest.fixture(scope="module")
def html(smoke_run):
    return BeautifulSoup((smoke_run / "report" / "report-smoke.html").read_text(), "html.parser")


@pytest.mark.integration
def test_every_claim_of_every_paper_has_a_row(html):
    rows = {r["data-claim"] for r in html.select("tr.claim-row")}
    expected = {f"{p}.{c.id}" for p, pc in load_all_claims().items() for c in pc.claims}
    assert rows == expected


@pytest.mark.integration
def test_verdict_classes_match_computed_verdicts(html, smoke_run):
    computed = {}
    for path in sorted((smoke_run / "results" / "smoke").glob("*/metrics.json")):
        paper = path.parent.name
        if paper in load_all_claims():  # the shared substrate (lm) has no claims of its own
            computed.update({f"{paper}.{r.claim.id}": r.verdict
                             for r in V.judge_paper(load_claims(paper), load_metrics(path))})
    ran = {key.split(".")[0] for key in computed}
    assert {"lec", "asyncspade"} <= ran
    for row in html.select("tr.claim-row"):
        badge = row.select_one(".badge")
        verdict = row["data-verdict"]
        assert badge.get_text(strip=True) == verdict
        assert f"v-{verdict.replace(' ', '-')}" in badge["class"]
        if row["data-claim"] in computed:
            assert verdict == computed[row["data-claim"]]
        else:
            assert verdict in (V.NOT_RUN, V.NOT_TESTABLE)


@pytest.mark.integration
def test_images_decode(html, smoke_run):
    """Every figure of every configured paper is embedded (one <img> per file of its figures folder)."""
    imgs = html.select("img")
    for paper, pngs in figure_files(smoke_run).items():
        assert pngs, paper
        shown = [i for i in imgs if i["alt"].startswith(f"{paper}: ")]
        assert len(shown) == len(pngs), (paper, [i["alt"] for i in shown], [p.name for p in pngs])
    for img in imgs:
        assert img["src"].startswith("data:image/png;base64,")
        Image.open(io.BytesIO(base64.b64decode(img["src"].split(",", 1)[1]))).verify()


@pytest.mark.integration
def test_provenance_and_costs(html):
    text = html.get_text(" ")
    for word in ("config hash", "torch", "snakemake", "CPU", "GPU"):
        assert word in text
    assert html.select("table.benchmarks tr")


def test_partial_run_and_escaping(tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"][0]["quote"] = "<script>alert(1)</script> maintains the level"
    (claims / "lec.yaml").write_text(yaml.safe_dump(raw))
    sections = build_sections("smoke", [], {}, tmp_path, 0.95, "t", claims_dir=claims)
    assert [s.status for s in sections] == ["not configured"]
    assert {r.verdict for r in sections[0].results} <= {V.NOT_RUN, V.NOT_TESTABLE}
    prov = {"commit": "abc", "dirty": False, "config_hash": "h", "date": "d", "python": "3", "platform": "p",
            "cpu": "c", "gpu": "none", "packages": {"torch": "x"}}
    out = render(sections, "smoke", prov, ROOT / "report" / "templates" / "report.html.j2", 0.95, "t")
    assert "<script>alert(1)" not in out and "&lt;script&gt;alert(1)" in out
    assert out.count("<script>") == 1  # the report's own filter script, nothing else


@pytest.mark.integration
def test_claims_table_shows_controls_labels_and_one_replicate(html):
    """Controls beside the measured value, `holds by construction` counted apart, reasons for claims
    without a control, and a stated number in another unit kept out of the measured column."""
    controlled = [(p, c.id) for p, pc in load_all_claims().items() for c in pc.claims if c.controls]
    assert controlled
    for paper, cid in controlled:
        row = html.select_one(f'tr[data-claim="{paper}.{cid}"]')
        if row["data-verdict"] not in (V.NOT_RUN, V.NOT_TESTABLE):
            assert row.select(".control"), (paper, cid)
    lec = html.select_one('tr[data-claim="lec.retention_maximizing"]')
    assert lec["data-verdict"] == V.HOLDS_BY_CONSTRUCTION
    assert "holds by construction" in html.select_one("#verdict-grid thead").get_text()  # a column of its own
    routing = html.select_one('tr[data-claim="lec.routing_acceptance"]')
    assert "0.339" not in routing.get_text() and "another unit" in routing.get_text()
    assert html.select(".no-control")


def test_one_replicate_is_labelled(tmp_path):
    from icmlrepro.core.metrics import MetricsFile

    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"] = raw["claims"][:1]
    raw.pop("gates", None)  # this test is about another part of the report: no gate metrics planted
    raw["claims"][0].pop("gates", None)
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "lec.yaml").write_text(yaml.safe_dump(raw))
    mf = MetricsFile("lec", "smoke", replicates=[0])
    for cond in raw["claims"][0]["predicate"]["all_of"]:
        mf.add(cond["metric"], [-0.01], unit="fraction")
    mf.write(tmp_path / "metrics.json")
    sections = build_sections("smoke", ["lec"], {"lec__metrics": str(tmp_path / "metrics.json")}, tmp_path,
                              0.95, "t", claims_dir=claims)
    assert sections[0].results[0].verdict == V.INCONCLUSIVE
    prov = {"commit": "abc", "dirty": False, "config_hash": "h", "date": "d", "python": "3", "platform": "p",
            "cpu": "c", "gpu": "none", "packages": {"torch": "x"}}
    out = BeautifulSoup(render(sections, "smoke", prov, ROOT / "report" / "templates" / "report.html.j2", 0.95, "t"),
                        "html.parser")
    assert out.select(".one-rep") and "(one replicate)" in out.select_one(".claim-badge").get_text()


def test_verdicts_cli_leaves_out_a_paper_whose_metrics_lack_a_claimed_metric(tmp_path, capsys):
    """A paper whose metrics.json lacks a metric its claims read (an older run) is left out with the file's error
    on stderr and exit status 1; the other papers are still judged (it used to stop on a NameError)."""
    from icmlrepro.core.cli import main
    from icmlrepro.core.metrics import MetricsFile

    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"] = raw["claims"][:1]
    raw.pop("gates", None)
    raw["claims"][0].pop("gates", None)
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "lec.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "results" / "lec").mkdir(parents=True)
    MetricsFile("lec", "smoke", replicates=[0]).write(tmp_path / "results" / "lec" / "metrics.json")
    assert main(["verdicts", "--scale", "smoke", "--results", str(tmp_path / "results"),
                 "--claims", str(claims)]) == 1
    err = capsys.readouterr().err
    assert "left out" in err and raw["claims"][0]["predicate"]["all_of"][0]["metric"] in err


def test_tuning_optima_at_a_grid_edge_are_listed(tmp_path):
    """Both flag polarities are read (``at_grid_edge`` 1 = edge, ``tuned_interior.`` 1 = interior), NaN
    replicates are left out, and only settings that sat at an edge are listed by name."""
    from icmlrepro.core.metrics import MetricsFile
    from icmlrepro.core.report import tuning_edges

    mf = MetricsFile("lec", "smoke", replicates=[0, 1])
    mf.add("lr_at_grid_edge.arm_a", [1.0, 0.0])
    mf.add("lr_at_grid_edge.arm_b", [0.0, float("nan")])
    mf.add("tuned_interior.arm_c", [0.0, 0.0])
    mf.add("tuned_interior.arm_d", [1.0, 1.0])
    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"] = raw["claims"][:1]
    raw.pop("gates", None)  # this test is about another part of the report: no gate metrics planted
    raw["claims"][0].pop("gates", None)
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "lec.yaml").write_text(yaml.safe_dump(raw))
    for cond in raw["claims"][0]["predicate"]["all_of"]:
        mf.add(cond["metric"], [-0.01, -0.02], unit="fraction")
    rows = {r["metric"]: r for r in tuning_edges(mf)}
    assert set(rows) == {"lr_at_grid_edge.arm_a", "lr_at_grid_edge.arm_b", "tuned_interior.arm_c",
                         "tuned_interior.arm_d"}
    assert rows["lr_at_grid_edge.arm_a"]["edge_share"] == 0.5 and rows["lr_at_grid_edge.arm_b"]["n"] == 1
    assert rows["tuned_interior.arm_c"]["edge_share"] == 1.0 and not rows["tuned_interior.arm_d"]["at_edge"]
    mf.write(tmp_path / "metrics.json")
    sections = build_sections("smoke", ["lec"], {"lec__metrics": str(tmp_path / "metrics.json")}, tmp_path,
                              0.95, "t", claims_dir=claims)
    prov = {"commit": "abc", "dirty": False, "config_hash": "h", "date": "d", "python": "3", "platform": "p",
            "cpu": "c", "gpu": "none", "packages": {"torch": "x"}}
    out = BeautifulSoup(render(sections, "smoke", prov, ROOT / "report" / "templates" / "report.html.j2", 0.95, "t"),
                        "html.parser")
    listed = [c.get_text() for c in out.select("table.tuning code")]
    assert listed == ["lr_at_grid_edge.arm_a", "tuned_interior.arm_c"]
    assert out.select_one(".tuning-summary").get_text().startswith("2 of 4 tuned settings")


def test_gates_power_and_decided_share_are_shown(tmp_path, capsys):
    """A paper's gates table opens its section; a blocked claim reads not testable, names the gate and keeps
    its values greyed; an inconclusive claim shows n*; the summary counts decided and blocked claims."""
    from icmlrepro.core.metrics import MetricsFile

    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"] = raw["claims"][:2]
    for c in raw["claims"]:
        c.pop("gates", None)
    raw["gates"] = [{"id": "base_works", "why": "the baseline must beat chance",
                     "all_of": [{"metric": "acc.base", "op": "between", "threshold": [0.3, 0.9],
                                 "floor": 0.5, "ceiling": 1.0}]}]
    raw["claims"][1]["gates"] = []
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "lec.yaml").write_text(yaml.safe_dump(raw))
    mf = MetricsFile("lec", "smoke", replicates=[0, 1, 2])
    mf.add("acc.base", [0.52, 0.5, 0.51])  # position 0.02 of the range: the gate fails
    pc_raw = raw["claims"]
    for cl in pc_raw:
        for cond in cl["predicate"]["all_of"]:
            for key in ("metric", "control"):
                if key in cond and cond[key] not in mf.metrics:
                    mf.add(cond[key], [0.0, 1.0, 2.0] if key == "metric" else [0.0, 0.0, 0.0], unit="fraction")
    mf.write(tmp_path / "metrics.json")
    sections = build_sections("smoke", ["lec"], {"lec__metrics": str(tmp_path / "metrics.json")}, tmp_path,
                              0.95, "t", claims_dir=claims)
    first, second = sections[0].results
    assert first.verdict == V.NOT_TESTABLE and first.blocked_by and "gate base_works failed" in first.reason
    assert not second.blocked_by and second.verdict != V.NOT_TESTABLE
    prov = {"commit": "abc", "dirty": False, "config_hash": "h", "date": "d", "python": "3", "platform": "p",
            "cpu": "c", "gpu": "none", "packages": {"torch": "x"}}
    out = BeautifulSoup(render(sections, "smoke", prov, ROOT / "report" / "templates" / "report.html.j2", 0.95, "t"),
                        "html.parser")
    gate_row = out.select_one("tr.gate-row")
    assert gate_row["data-gate-state"] == "fails" and first.claim.id in gate_row.get_text()
    row = out.select_one(f'tr[data-claim="lec.{first.claim.id}"]')
    assert "blocked" in row["class"] and "gate base_works failed" in row.get_text()
    assert out.select_one(".blocked-count").get_text() == "1"
    assert "of 2" in out.select_one(".decision").get_text()
    # the first screen's grid: the paper's row counts its verdicts, its blocked claims and its decided share
    grid_row = out.select_one('#verdict-grid tr[data-paper="lec"]')
    counts = {td["data-verdict-count"]: int(td.get_text()) for td in grid_row.select("td[data-verdict-count]")}
    assert counts[V.NOT_TESTABLE] == 1 and counts[V.INCONCLUSIVE] == 1 and sum(counts.values()) == 2
    assert grid_row.select_one(".decided-share").get_text() == "0%"
    assert out.select_one("details.legend") is not None  # the legend folds away
    from icmlrepro.core.cli import main
    mf.write(tmp_path / "res" / "lec" / "metrics.json")
    main(["verdicts", "--scale", "smoke", "--results", str(tmp_path / "res"), "--claims", str(claims)])
    text = capsys.readouterr().out
    assert "gate base_works: fails" in text and f"{first.claim.id}: not testable at this scale (ungated:" in text
    assert "decided 0 of 2 that ran; blocked by a gate 1" in text
    assert second.verdict == V.INCONCLUSIVE and second.n_star == 7  # values 0, 1, 2 against 0: mean 1, sd 1
    assert out.select(".seeds-needed") and "n* ≈ 7 seeds" in out.select_one(f'tr[data-claim="lec.{second.claim.id}"]').get_text()


@pytest.mark.integration
def test_snakemake_report_has_one_category_per_paper(smoke_run):
    out = smoke_run / "report" / "snakemake.html"
    snakemake(smoke_run, "--report", str(out), "--config", "scale=smoke")
    text = out.read_text(errors="ignore")
    for paper, pngs in figure_files(smoke_run).items():
        assert f'"{paper}"' in text, paper


@pytest.mark.parametrize("caption", sorted((ROOT / "report" / "captions").glob("*.rst")), ids=lambda p: p.stem)
def test_every_caption_renders_without_docutils_errors(caption):
    """Snakemake's --report renders captions as reStructuredText: a stray ``|x|`` is read as a substitution
    and logged as an error (issue 43 item 7: the CCC-GRPO caption's ``-|q - y|``)."""
    from docutils.core import publish_doctree

    err = io.StringIO()
    publish_doctree(caption.read_text(), settings_overrides={"warning_stream": err, "report_level": 2,
                                                             "halt_level": 5})
    assert err.getvalue() == "", err.getvalue()
