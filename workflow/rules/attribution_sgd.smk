# Attribution robustness from SGD dynamics (resources/claims/attribution_sgd.yaml).
# attribution_sgd_data -> attribution_sgd_train (one job per model family, looping over seeds, data sets,
# models and the lr/batch sweep; each model is measured right after training) -> attribution_sgd_eval -> figures
from icmlrepro.papers.attribution_sgd.workflow_inputs import attribution_sgd_tables


rule attribution_sgd_data:
    output:
        digits="results/{scale}/attribution_sgd/data/digits.parquet",
        lfw="results/{scale}/attribution_sgd/data/lfw.parquet",
    params:
        stage="attribution_sgd.data",
        spec=paths_spec,
        settings=settings_of("attribution_sgd", "scale"),
    log:
        "results/{scale}/attribution_sgd/logs/attribution_sgd_data.log",
    benchmark:
        "results/{scale}/attribution_sgd/benchmarks/attribution_sgd_data.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule attribution_sgd_train:
    input:
        digits=rules.attribution_sgd_data.output.digits,
        lfw=rules.attribution_sgd_data.output.lfw,
    output:
        table="results/{scale}/attribution_sgd/train/{family}/measurements.parquet",
    params:
        stage="attribution_sgd.train",
        spec=paths_spec,
        settings=settings_of(
            "attribution_sgd", "seeds", "datasets", "headline", "sweep", "reg_lams", "steps", "warmup_steps", "clip_norm",
            "n_train",
            "test_fraction", "width", "n_eval", "n_hess", "power_iters", "hutchinson_probes", "eps", "k",
            "k_tokens", "attack_steps", "smoothgrad_samples", "smoothgrad_sigma", "ig_steps",
        ),
    log:
        "results/{scale}/attribution_sgd/logs/attribution_sgd_train/{family}.log",
    benchmark:
        "results/{scale}/attribution_sgd/benchmarks/attribution_sgd_train/{family}.tsv"
    wildcard_constraints:
        family="feedforward|transformer",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        # every seed in one job: default ~5 (feedforward) and ~7 (transformer) minutes for 9 seeds
        runtime=lambda wildcards, attempt: {"smoke": 10, "default": 40, "paper": 3600}[wildcards.scale] * attempt,
    conda:
        ENV
    shell:
        STAGE


rule attribution_sgd_eval:
    input:
        unpack(lambda wildcards: attribution_sgd_tables(paper_settings(config, "attribution_sgd", wildcards.scale))),
    output:
        metrics="results/{scale}/attribution_sgd/metrics.json",
        summary="results/{scale}/attribution_sgd/eval/summary.parquet",
    params:
        stage="attribution_sgd.evaluate",
        spec=paths_spec,
        settings=settings_of("attribution_sgd"),
    log:
        "results/{scale}/attribution_sgd/logs/attribution_sgd_eval.log",
    benchmark:
        "results/{scale}/attribution_sgd/benchmarks/attribution_sgd_eval.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule attribution_sgd_figures:
    input:
        summary=rules.attribution_sgd_eval.output.summary,
    output:
        noise=report("results/{scale}/attribution_sgd/figures/robustness_vs_noise.png", caption="../../report/captions/attribution_sgd.rst", category="attribution_sgd"),
        curvature=report("results/{scale}/attribution_sgd/figures/curvature_link.png", caption="../../report/captions/attribution_sgd.rst", category="attribution_sgd"),
        attention=report("results/{scale}/attribution_sgd/figures/attention.png", caption="../../report/captions/attribution_sgd.rst", category="attribution_sgd"),
        headline=report("results/{scale}/attribution_sgd/figures/headline_arms.png", caption="../../report/captions/attribution_sgd.rst", category="attribution_sgd"),
    params:
        stage="attribution_sgd.figures",
        spec=paths_spec,
        settings=settings_of("attribution_sgd", "headline"),
    log:
        "results/{scale}/attribution_sgd/logs/attribution_sgd_figures.log",
    benchmark:
        "results/{scale}/attribution_sgd/benchmarks/attribution_sgd_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["attribution_sgd"] = {
    "metrics": rules.attribution_sgd_eval.output.metrics,
    "figures": list(rules.attribution_sgd_figures.output),
}
