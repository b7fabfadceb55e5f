# Shared helpers of all rules: config validation before any job, paths, the stage command.
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))  # the package, also when not installed

from snakemake.exceptions import WorkflowError

from icmlrepro.core.config import ConfigError, paper_settings, validate_config
from icmlrepro.core.device import gpu_resources
from icmlrepro.core.config import CHECK_HINT
from icmlrepro.core.offline import job_environment
from icmlrepro.core.scheduler_wakeups import one_pending_wakeup

# Snakemake's scheduler otherwise gains a 1-second wake-up per finished job (see the module).
one_pending_wakeup()

# Where the config came from, lowest precedence first, so that an error names the file and line.
_cli_configfiles = [str(f) for f in workflow.config_settings.configfiles]
_configfiles = [str(f) for f in workflow.configfiles if str(f) not in _cli_configfiles] + _cli_configfiles
try:
    validate_config(config, _configfiles, dict(workflow.config_settings.config))
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration: {exc}\n({CHECK_HINT})") from None

# Jobs inherit these (the one place a job's environment is set): hub libraries offline, headless
# plots, the network guard in every Python child, this checkout's code first on PYTHONPATH and
# named in ICMLREPRO_ROOT (see icmlrepro.core.offline.job_environment), and the `python` of the
# environment that runs Snakemake first on PATH (also when the virtual environment is not activated).
os.environ.update(job_environment(workflow.basedir))
envvars:
    "PATH",


_path = os.environ["PATH"]
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), _path])

SCALE = config["scale"]
GPU = gpu_resources(config["gpu"])  # resources of every GPU-tagged rule
# Kernel rules on a job without a GPU run Triton under its interpreter, which must be on before triton is
# imported (a GPU-tagged job that finds no CUDA switches it on in-process: core.kernelbench).
TRITON_CPU_ENV = "TRITON_INTERPRET=1 " if GPU["gpu"] == 0 else ""
PAPERS = list(config["papers"])
ENV = "../../envs/pipeline.yaml"


wildcard_constraints:
    scale="smoke|default|paper",
    seed=r"\d+",


def paths_spec(wildcards, input, output, threads, resources):
    """The job's named inputs/outputs, wildcards and threads as JSON (``--spec`` of a stage).

    A GPU-tagged job also carries its ``gpu`` resource: the stage runner exports it, and
    ``core.device.torch_device()`` computes on CUDA only when it is > 0 (config ``gpu`` != cpu).
    """
    spec = {
        "input": dict(input.items()),
        "output": dict(output.items()),
        "wildcards": dict(wildcards.items()),
        "threads": threads,
    }
    gpus = int(getattr(resources, "gpu", 0) or 0)
    if gpus > 0:
        spec["gpu"] = gpus
    return json.dumps(spec, sort_keys=True)


def settings_of(paper, *keys):
    """The paper's settings at the job's scale as JSON (``--settings`` of a stage).

    ``keys`` limits them to what the stage reads, so that changing, say, the risk levels does
    not retrain models; a single callable of the wildcards gives keys that differ between the jobs of one rule
    (LEC's MLP epochs reach the MLP's training jobs only). A params function of wildcards only, so Snakemake
    records it and a change of these settings reruns the job (params derived from input/output are not tracked).
    """

    def settings(wildcards):
        block = paper_settings(config, paper, wildcards.scale)
        wanted = keys[0](wildcards) if len(keys) == 1 and callable(keys[0]) else keys
        if wanted:
            block = {k: block[k] for k in ("scale", *wanted)}
        return json.dumps(block, sort_keys=True)

    return settings


STAGE = "python -m icmlrepro stage {params.stage} --spec {params.spec:q} --settings {params.settings:q} > {log} 2>&1"

# Each paper's .smk registers what the report reads from it: {"metrics": pattern, "figures": [patterns]}
# (patterns with {scale}). Papers missing here show as "not run".
PAPER_OUTPUTS = {}


REPORT_TEMPLATE = "report/templates/report.html.j2"


def report_sources():
    """What the report reads besides results: every claims file (the report covers the whole
    registry), the claims schema and the templates. Inputs, so that editing any of them reruns
    `report` (a predicate, threshold or quote changes the verdicts shown)."""
    sources = {f"claims__{f.stem}": str(f) for f in sorted(Path("resources/claims").glob("*.yaml"))}
    sources["claims_schema"] = "config/schema/claims.schema.yaml"
    for f in sorted(Path(REPORT_TEMPLATE).parent.iterdir()):
        if f.is_file():
            sources[f"template__{f.name}"] = str(f)
    return sources


def report_inputs(wildcards):
    """Metrics and figures of every configured paper that has rules (the rest show as not run),
    and the claims, schema and templates the report is rendered from."""
    inputs = {"device": f"results/{wildcards.scale}/device/gpu_rule.json", **report_sources()}
    for paper in PAPERS:
        outs = PAPER_OUTPUTS.get(paper)
        if outs is None:
            continue
        inputs[f"{paper}__metrics"] = expand(outs["metrics"], scale=wildcards.scale)[0]
        for i, fig in enumerate(outs["figures"]):
            inputs[f"{paper}__figure{i}"] = expand(fig, scale=wildcards.scale)[0]
    return inputs


def paper_targets(scale):
    """Every configured paper's metrics and figures at ``scale``. The default target names them beside the
    report: when a rerun of a stage fails, Snakemake deletes that job's outputs, and a report that is still
    on disk would otherwise make the next plain run say "Nothing to be done" (a present target with missing
    inputs is not rebuilt), leaving the report showing numbers whose metrics are gone."""
    inputs = report_inputs(SimpleNamespace(scale=scale))
    return [v for k, v in inputs.items() if k.endswith("__metrics") or "__figure" in k]


def report_config(scale):
    """The part of the config the report covers: the shared keys, and the blocks of the configured papers (and of
    shared substrates such as the LM) at ``scale``. The report reads its verdict settings from it and hashes it for
    the provenance; handing it the whole config made any edit (an unconfigured paper's block, another scale's
    settings) rerun the report."""
    out = {}
    for key, value in config.items():
        scaled = isinstance(value, dict) and scale in value
        if key in PAPER_OUTPUTS and key not in PAPERS:
            continue
        out[key] = value[scale] if scaled else value
    return out


def report_settings(wildcards):
    return json.dumps(
        {
            "scale": wildcards.scale,
            "papers": PAPERS,
            "config": report_config(wildcards.scale),
            "template": REPORT_TEMPLATE,
            "results_dir": str(Path("results") / wildcards.scale),
        },
        sort_keys=True,
    )
