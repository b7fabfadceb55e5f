# Shared helpers of all rules: config validation before any job, paths, the stage command.
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))  # the package, also when not installed

from snakemake.exceptions import WorkflowError

from icmlrepro.core.config import ConfigError, paper_settings, validate_config
from icmlrepro.core.offline import OFFLINE_ENV

try:
    validate_config(config)
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration: {exc}") from None

# Jobs inherit these: hub libraries offline, headless plots.
os.environ.update(OFFLINE_ENV)

SCALE = config["scale"]
PAPERS = list(config["papers"])
ENV = "../../envs/pipeline.yaml"


wildcard_constraints:
    scale="smoke|default|paper",
    seed=r"\d+",


def res(scale, paper, *parts):
    """Path under results/<scale>/<paper>/."""
    return "/".join(["results", scale, paper, *parts])


def seeds_of(paper, scale):
    return paper_settings(config, paper, scale)["seeds"]


def stage_spec(paper):
    """The ``--spec`` JSON a stage receives: named inputs/outputs, wildcards, threads, settings.

    Built per job by Snakemake (a params function), so a change of settings reruns the job.
    """

    def spec(wildcards, input, output, threads):
        return json.dumps(
            {
                "input": dict(input.items()),
                "output": dict(output.items()),
                "wildcards": dict(wildcards.items()),
                "threads": threads,
                "params": paper_settings(config, paper, wildcards.scale),
            },
            sort_keys=True,
        )

    return spec


STAGE = "python -m icmlrepro stage {params.stage} --spec {params.spec:q} > {log} 2>&1"

# Each paper's .smk registers what the report reads from it: {"metrics": pattern, "figures": [patterns]}
# (patterns with {scale}). Papers missing here show as "not run".
PAPER_OUTPUTS = {}
