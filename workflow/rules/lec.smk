# LEC: selection-conditioned risk control (resources/claims/lec.yaml).
# lec_data -> lec_train (model x seed) -> lec_eval -> lec_figures
from icmlrepro.papers.lec.workflow_inputs import lec_prediction_files

# The settings of one base model reach its own training jobs alone.
LEC_MODEL_SETTINGS = {"mlp": ("mlp_epochs",), "gnb": ("gnb_var_smoothing",)}


rule lec_data:
    output:
        table="results/{scale}/lec/data/digits.parquet",
    params:
        stage="lec.data",
        spec=paths_spec,
        settings=settings_of("lec", "scale"),
    log:
        "results/{scale}/lec/logs/lec_data.log",
    benchmark:
        "results/{scale}/lec/benchmarks/lec_data.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule lec_train:
    input:
        table=rules.lec_data.output.table,
    output:
        predictions="results/{scale}/lec/train/{model}/seed{seed}/predictions.parquet",
    params:
        stage="lec.train",
        spec=paths_spec,
        settings=settings_of("lec", lambda w: ("train_fraction", *LEC_MODEL_SETTINGS.get(w.model, ()))),
    log:
        "results/{scale}/lec/logs/lec_train/{model}-seed{seed}.log",
    benchmark:
        "results/{scale}/lec/benchmarks/lec_train/{model}-seed{seed}.tsv"
    wildcard_constraints:
        model="gnb|logreg|mlp",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 1500 * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule lec_eval:
    input:
        unpack(lambda wildcards: lec_prediction_files(paper_settings(config, "lec", wildcards.scale))),
    output:
        metrics="results/{scale}/lec/metrics.json",
        splits="results/{scale}/lec/eval/splits.parquet",
        summary="results/{scale}/lec/eval/summary.parquet",
        synthetic="results/{scale}/lec/eval/synthetic.parquet",
    params:
        stage="lec.evaluate",
        spec=paths_spec,
        settings=settings_of("lec"),
    log:
        "results/{scale}/lec/logs/lec_eval.log",
    benchmark:
        "results/{scale}/lec/benchmarks/lec_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule lec_figures:
    input:
        summary=rules.lec_eval.output.summary,
        synthetic=rules.lec_eval.output.synthetic,
    output:
        risk=report("results/{scale}/lec/figures/risk_vs_alpha.png", caption="../../report/captions/lec.rst", category="lec"),
        retention=report("results/{scale}/lec/figures/retention_vs_alpha.png", caption="../../report/captions/lec.rst", category="lec"),
        routing=report("results/{scale}/lec/figures/routing.png", caption="../../report/captions/lec.rst", category="lec"),
        synthetic=report("results/{scale}/lec/figures/synthetic_risk.png", caption="../../report/captions/lec.rst", category="lec"),
    params:
        stage="lec.figures",
        spec=paths_spec,
        settings=settings_of("lec", "routing"),
    log:
        "results/{scale}/lec/logs/lec_figures.log",
    benchmark:
        "results/{scale}/lec/benchmarks/lec_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["lec"] = {
    "metrics": rules.lec_eval.output.metrics,
    "figures": list(rules.lec_figures.output),
}
