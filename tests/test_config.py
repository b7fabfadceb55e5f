"""A wrong config key, type or value stops the run before any job, naming the key and the allowed values."""

import copy

import pytest
import yaml

from icmlrepro.core.config import ConfigError, paper_settings, seeds, validate_config

from .conftest import ROOT, copy_workflow, snakemake


@pytest.fixture
def config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_shipped_config_is_valid(config):
    validate_config(config)


@pytest.mark.parametrize("mutate, expected", [
    (lambda c: c.update(scale="huge"), ["'scale'", "'huge'", "'smoke'", "'default'", "'paper'"]),
    (lambda c: c["lec"]["smoke"].update(n_seeds=-1), ["'lec.smoke.n_seeds'", "minimum", "1"]),
    (lambda c: c.update(papers=["lec", "nosuchpaper"]), ["'papers.1'", "'nosuchpaper'", "'lec'"]),
    (lambda c: c.update(sedes={"base": 0}), ["'sedes'", "allowed keys", "seeds"]),
    (lambda c: c["lec"]["default"].update(n_split=3), ["'lec.default.n_split'", "n_splits"]),
    (lambda c: c["seeds"].update(base="zero"), ["'seeds.base'", "integer"]),
    (lambda c: c["verdicts"].update(ci_method="bayes"), ["'verdicts.ci_method'", "'t'", "'bootstrap'"]),
])
def test_bad_config_names_key_and_allowed(config, mutate, expected):
    bad = copy.deepcopy(config)
    mutate(bad)
    with pytest.raises(ConfigError) as exc:
        validate_config(bad)
    for word in expected:
        assert word in str(exc.value), (word, str(exc.value))


def test_paper_listed_without_block(config):
    bad = copy.deepcopy(config)
    del bad["lec"]
    with pytest.raises(ConfigError, match="'lec'"):
        validate_config(bad)


def test_seeds_and_settings(config):
    config["seeds"]["base"] = 7
    assert seeds(config, "lec", "smoke") == [7 + i for i in range(config["lec"]["smoke"]["n_seeds"])]
    s = paper_settings(config, "lec", "default")
    assert s["scale"] == "default" and s["seeds"][0] == 7 and s["n_splits"] == config["lec"]["default"]["n_splits"]


@pytest.mark.parametrize("override, expected", [
    ("scale=huge", "allowed values: 'smoke', 'default', 'paper'"),
    ("papers=[lec,foo]", "'foo' is not allowed"),
])
def test_snakemake_stops_before_any_job(tmp_path, override, expected):
    work = copy_workflow(tmp_path)
    proc = snakemake(work, "-n", "--config", override, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert expected in out
    assert "Job stats" not in out and not (work / "results").exists()
