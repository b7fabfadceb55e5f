"""The claims registry covers all 19 papers, follows its schema and quotes the abstracts exactly."""

import pytest
import yaml

from icmlrepro.core.claims import ClaimsError, all_papers, load_all_claims, parse_claims

from .conftest import ROOT

ABSTRACTS = (ROOT / "resources" / "abstracts" / "icml2026_seed_abstracts.txt").read_text()
PARAGRAPHS = [p for p in ABSTRACTS.split("\n\n") if len(p) > 200]


def test_one_claims_file_per_abstract():
    assert len(PARAGRAPHS) == 19
    papers = all_papers()
    assert len(papers) == 19, papers


@pytest.mark.parametrize("paper", all_papers())
def test_claims_file_valid_and_quotes_exact(paper):
    pc = load_all_claims()[paper]
    own = [p for p in PARAGRAPHS if pc.abstract_start in p]
    assert len(own) == 1, f"{paper}: abstract_start must identify exactly one abstract"
    assert pc.claims, paper
    ids = [c.id for c in pc.claims]
    assert len(ids) == len(set(ids)), f"{paper}: duplicate claim ids"
    for c in pc.claims:
        assert c.quote in own[0], f"{paper}.{c.id}: quote is not verbatim from its abstract"
        assert bool(c.conditions) != bool(c.not_testable), f"{paper}.{c.id}: predicate xor not_testable"


def test_each_abstract_has_a_claims_file():
    starts = [pc.abstract_start for pc in load_all_claims().values()]
    for para in PARAGRAPHS:
        assert sum(s in para for s in starts) == 1, para[:80]


def test_schema_rejects_claim_without_predicate():
    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    del raw["claims"][0]["predicate"]
    with pytest.raises(ClaimsError, match="claims/0"):
        parse_claims(raw, "lec.yaml")


def test_schema_rejects_unknown_operator():
    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"][0]["predicate"]["all_of"][0]["op"] = "=="
    with pytest.raises(ClaimsError):
        parse_claims(raw, "lec.yaml")
