"""A wrong config key, type or value stops the run before any job, naming the key and the allowed values."""

import copy
import re
import subprocess
import sys

import pytest
import yaml

from icmlrepro.core.config import ConfigError, check_config_file, paper_settings, seeds, validate_config

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
    pe = paper_settings(config, "collapsed_ops", "default")  # a stage with its own n_seeds: the paper's seeds first
    assert pe["encodings"]["seeds"] == [7 + i for i in range(config["collapsed_ops"]["default"]["encodings"]["n_seeds"])]
    assert pe["encodings"]["seeds"][:len(pe["seeds"])] == pe["seeds"]


@pytest.mark.parametrize("override, expected", [
    ("scale=huge", "allowed values: 'smoke', 'default', 'paper'"),
    ("papers=[lec,foo]", "'foo' is not allowed"),
    ("papers=[]", "--config: config key 'papers': needs at least one entry"),
    ("lec={smoke: {n_seeds: 0}}", "--config: config key 'lec.smoke.n_seeds': 0 is less than the minimum of 1"),
])
def test_snakemake_stops_before_any_job(tmp_path, override, expected):
    work = copy_workflow(tmp_path)
    proc = snakemake(work, "-n", "--config", override, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert expected in out and "check-config FILE" in out
    assert "Job stats" not in out and not (work / "results").exists()


def test_empty_papers_rejected(config):
    config["papers"] = []
    with pytest.raises(ConfigError, match="'papers': needs at least one entry"):
        validate_config(config)


def test_nested_overrides_are_read_as_yaml(config):
    """Snakemake hands `--config seeds={base: 3}` over as {'base': '3'}: judged as the number 3."""
    config["seeds"] = {"base": "3"}
    config["lec"]["smoke"].update(n_seeds="2", alphas="[0.1, 0.2]", delta="1e-3")
    validate_config(config)
    assert config["seeds"]["base"] == 3 and config["lec"]["smoke"]["n_seeds"] == 2
    assert config["lec"]["smoke"]["alphas"] == [0.1, 0.2] and config["lec"]["smoke"]["delta"] == 0.001
    config["lec"]["smoke"]["n_seeds"] = "two"  # still a wrong type when it is no number
    with pytest.raises(ConfigError, match="'lec.smoke.n_seeds': 'two' is not of type 'integer'"):
        validate_config(config)


def test_nested_override_reaches_the_dag(tmp_path):
    work = copy_workflow(tmp_path)
    proc = snakemake(work, "-n", "--config", "scale=smoke", "papers=[lec]", "lec={smoke: {n_seeds: 3}}")
    assert re.search(r"^lec_train\s+9$", proc.stdout + proc.stderr, flags=re.M)  # 3 models x 3 seeds


BAD_FILES = {
    "syntax.yaml": ("scale: smoke\npapers: [lec\nfoo: 1\n", ":3:4: not valid YAML"),
    "tab.yaml": ("scale: smoke\n\tpapers: [lec]\n", ":2:1: not valid YAML"),
    "value.yaml": ("scale: smoke\nlec:\n  smoke:\n    n_seeds: 0\n", ":4:5: config key 'lec.smoke.n_seeds'"),
    "key.yaml": ("lec:\n  smoke:\n    n_sedes: 2\n", ":3:5: unknown config key 'lec.smoke.n_sedes'"),
    "list.yaml": ("- lec\n", ":1:1: a config file must map keys to values"),
    "duplicate.yaml": ("scale: smoke\npapers: [lec]\nscale: default\n",
                       ":3:1: not valid YAML: duplicate key 'scale' (first given on line 1)"),
    "empty.yaml": ("\n", ":1:1: the config file is empty"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_check_config_names_file_line_and_column(tmp_path, name):
    text, expected = BAD_FILES[name]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        check_config_file(path)
    assert str(exc.value).startswith(str(path) + expected[: expected.index(" ")]), str(exc.value)
    assert expected in str(exc.value)


def test_check_config_command(tmp_path):
    """`python -m icmlrepro check-config FILE`: one line per file, no traceback, exit status 1 on a problem."""
    good = tmp_path / "good.yaml"
    good.write_text("scale: smoke\npapers: [lec]\n")
    missing = tmp_path / "missing.yaml"
    proc = subprocess.run([sys.executable, "-m", "icmlrepro", "check-config", str(good), str(missing),
                           str(ROOT / "config" / "config.yaml")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [f"{good}: valid", f"{ROOT / 'config' / 'config.yaml'}: valid"]
    assert proc.stderr.strip() == f"invalid configuration: {missing}: no such config file"


def test_snakemake_names_the_configfile_line(tmp_path):
    """A --configfile that Snakemake can read but that breaks the schema: file, line and column."""
    work = copy_workflow(tmp_path)
    conf = tmp_path / "mine.yaml"
    conf.write_text(BAD_FILES["value.yaml"][0])
    proc = snakemake(work, "-n", "--configfile", str(conf), check=False)
    assert proc.returncode != 0
    assert f"{conf}:4:5: config key 'lec.smoke.n_seeds'" in proc.stdout + proc.stderr


def test_cross_references_are_checked_before_any_job(tmp_path):
    """LEC's routing must name models the run trains (issue 43 item 4: it failed after training with
    KeyError: 'mlp'); the message names the key, the value, the list and where the value was set."""
    path = tmp_path / "cross.yaml"
    path.write_text("lec:\n  smoke:\n    routing: {primary: logreg, secondary: mlp}\n    models: [gnb, logreg]\n")
    with pytest.raises(ConfigError) as exc:
        check_config_file(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}:3:") and "config key 'lec.smoke.routing.secondary': 'mlp' is not in" in msg
    path.write_text("graph_alignment:\n  smoke:\n    transfer: {source: real}\n")
    with pytest.raises(ConfigError, match=r"graph_alignment.smoke.transfer.source': 'real' is not in"):
        check_config_file(path)
    path.write_text("asyncspade:\n  default:\n    headline_budget: 48\n")  # the accuracy claims' budget
    with pytest.raises(ConfigError, match=r"asyncspade.default.headline_budget': 48 is not in"):
        check_config_file(path)
    path.write_text("lec:\n  smoke:\n    models: [gnb, logreg, mlp]\n")
    check_config_file(path)
