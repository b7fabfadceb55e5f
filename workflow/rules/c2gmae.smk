# C2-GMAE: consistency- and coverage-aware graph masked auto-encoder (resources/claims/c2gmae.yaml).
# c2gmae_data (graph, every seed's draw) -> c2gmae_train (graph, every seed, whole ladder) -> c2gmae_eval -> c2gmae_figures
from icmlrepro.papers.c2gmae.workflow_inputs import c2gmae_train_files


rule c2gmae_data:
    output:
        graph="results/{scale}/c2gmae/data/{graph}.npz",
        info="results/{scale}/c2gmae/data/{graph}.json",
    params:
        stage="c2gmae.data",
        spec=paths_spec,
        settings=settings_of("c2gmae", "seeds", "csbm", "digits_knn", "model", "c2gmae"),
    log:
        "results/{scale}/c2gmae/logs/c2gmae_data/{graph}.log",
    benchmark:
        "results/{scale}/c2gmae/benchmarks/c2gmae_data/{graph}.tsv"
    wildcard_constraints:
        graph=r"csbm_h[0-9.]+(_s[0-9.]+)?(_pair)?|digits_knn",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule c2gmae_train:
    input:
        graph=rules.c2gmae_data.output.graph,
    output:
        rungs="results/{scale}/c2gmae/train/{graph}/rungs.parquet",
        bins="results/{scale}/c2gmae/train/{graph}/bins.parquet",
        curves="results/{scale}/c2gmae/train/{graph}/curves.parquet",
        refs="results/{scale}/c2gmae/train/{graph}/refs.parquet",
    params:
        stage="c2gmae.train",
        spec=paths_spec,
        settings=settings_of("c2gmae", "seeds", "model", "c2gmae", "train", "eval", "rungs"),
    log:
        "results/{scale}/c2gmae/logs/c2gmae_train/{graph}.log",
    benchmark:
        "results/{scale}/c2gmae/benchmarks/c2gmae_train/{graph}.tsv"
    wildcard_constraints:
        graph=r"csbm_h[0-9.]+(_s[0-9.]+)?(_pair)?|digits_knn",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 1500 * attempt,
        runtime=lambda wildcards, attempt: (1440 if wildcards.scale == "paper" else 60) * attempt,  # all seeds of a graph
    conda:
        ENV
    shell:
        STAGE


rule c2gmae_eval:
    input:
        unpack(lambda wildcards: c2gmae_train_files(paper_settings(config, "c2gmae", wildcards.scale))),
    output:
        metrics="results/{scale}/c2gmae/metrics.json",
        summary="results/{scale}/c2gmae/eval/summary.parquet",
        bins="results/{scale}/c2gmae/eval/coverage_bins.parquet",
        curves="results/{scale}/c2gmae/eval/curves.parquet",
    params:
        stage="c2gmae.evaluate",
        spec=paths_spec,
        settings=settings_of("c2gmae"),
    log:
        "results/{scale}/c2gmae/logs/c2gmae_eval.log",
    benchmark:
        "results/{scale}/c2gmae/benchmarks/c2gmae_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 1500 * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule c2gmae_figures:
    input:
        summary=rules.c2gmae_eval.output.summary,
        bins=rules.c2gmae_eval.output.bins,
    output:
        ladder=report("results/{scale}/c2gmae/figures/ladder_accuracy.png", caption="../../report/captions/c2gmae.rst", category="c2gmae"),
        homophily=report("results/{scale}/c2gmae/figures/accuracy_vs_homophily.png", caption="../../report/captions/c2gmae.rst", category="c2gmae"),
        consistency=report("results/{scale}/c2gmae/figures/consistency_vs_reconstruction.png", caption="../../report/captions/c2gmae.rst", category="c2gmae"),
        coverage=report("results/{scale}/c2gmae/figures/coverage_by_density_bin.png", caption="../../report/captions/c2gmae.rst", category="c2gmae"),
    params:
        stage="c2gmae.figures",
        spec=paths_spec,
        settings=settings_of("c2gmae", "rungs"),
    log:
        "results/{scale}/c2gmae/logs/c2gmae_figures.log",
    benchmark:
        "results/{scale}/c2gmae/benchmarks/c2gmae_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["c2gmae"] = {
    "metrics": rules.c2gmae_eval.output.metrics,
    "figures": list(rules.c2gmae_figures.output),
}
