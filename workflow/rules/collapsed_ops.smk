# Collapsed Effective Operators: Schur complement of a graded Laplacian (resources/claims/collapsed_ops.yaml).
# collapsed_ops_data -> {collapsed_ops_properties, collapsed_ops_clustering, collapsed_ops_smoothing,
#                        collapsed_ops_train (per encoding)} -> collapsed_ops_eval -> collapsed_ops_figures
from icmlrepro.papers.collapsed_ops.workflow_inputs import collapsed_ops_stage_files


rule collapsed_ops_data:
    output:
        graphs="results/{scale}/collapsed_ops/data/graphs.parquet",
        edges="results/{scale}/collapsed_ops/data/edges.parquet",
        nodes="results/{scale}/collapsed_ops/data/nodes.parquet",
    params:
        stage="collapsed_ops.data",
        spec=paths_spec,
        settings=settings_of("collapsed_ops", "seeds", "max_rank", "properties", "smoothing", "clustering", "encodings"),
    log:
        "results/{scale}/collapsed_ops/logs/collapsed_ops_data.log",
    benchmark:
        "results/{scale}/collapsed_ops/benchmarks/collapsed_ops_data.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule collapsed_ops_properties:
    input:
        **rules.collapsed_ops_data.output,
    output:
        properties="results/{scale}/collapsed_ops/properties/properties.parquet",
    params:
        stage="collapsed_ops.properties",
        spec=paths_spec,
        settings=settings_of("collapsed_ops", "seeds", "coupling_weights", "hodge_weights", "cell_mass", "eps",
                             "cg_rtol", "density_tol", "properties"),
    log:
        "results/{scale}/collapsed_ops/logs/collapsed_ops_properties.log",
    benchmark:
        "results/{scale}/collapsed_ops/benchmarks/collapsed_ops_properties.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule collapsed_ops_clustering:
    input:
        **rules.collapsed_ops_data.output,
    output:
        clustering="results/{scale}/collapsed_ops/clustering/clustering.parquet",
    params:
        stage="collapsed_ops.clustering",
        spec=paths_spec,
        settings=settings_of("collapsed_ops", "seeds", "coupling_weights", "hodge_weights", "cell_mass", "eps",
                             "tuning", "clustering"),
    log:
        "results/{scale}/collapsed_ops/logs/collapsed_ops_clustering.log",
    benchmark:
        "results/{scale}/collapsed_ops/benchmarks/collapsed_ops_clustering.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule collapsed_ops_smoothing:
    input:
        **rules.collapsed_ops_data.output,
    output:
        smoothing="results/{scale}/collapsed_ops/smoothing/smoothing.parquet",
        validation="results/{scale}/collapsed_ops/smoothing/validation.parquet",
    params:
        stage="collapsed_ops.smoothing",
        spec=paths_spec,
        settings=settings_of("collapsed_ops", "seeds", "coupling_weights", "hodge_weights", "cell_mass", "eps",
                             "cg_rtol", "tuning", "smoothing"),
    log:
        "results/{scale}/collapsed_ops/logs/collapsed_ops_smoothing.log",
    benchmark:
        "results/{scale}/collapsed_ops/benchmarks/collapsed_ops_smoothing.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule collapsed_ops_train:
    input:
        **rules.collapsed_ops_data.output,
    output:
        results="results/{scale}/collapsed_ops/train/{encoding}/results.parquet",
        curves="results/{scale}/collapsed_ops/train/{encoding}/curves.parquet",
    params:
        stage="collapsed_ops.train",
        spec=paths_spec,
        settings=settings_of("collapsed_ops", "seeds", "coupling_weights", "hodge_weights", "cell_mass", "eps",
                             "encodings"),
    log:
        "results/{scale}/collapsed_ops/logs/collapsed_ops_train/{encoding}.log",
    benchmark:
        "results/{scale}/collapsed_ops/benchmarks/collapsed_ops_train/{encoding}.tsv"
    wildcard_constraints:
        encoding="nope|laplacepe|schurpe",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule collapsed_ops_eval:
    input:
        unpack(lambda wildcards: collapsed_ops_stage_files(wildcards.scale)),
    output:
        metrics="results/{scale}/collapsed_ops/metrics.json",
    params:
        stage="collapsed_ops.evaluate",
        spec=paths_spec,
        settings=settings_of("collapsed_ops", "seeds", "encodings", "tuning"),  # encodings: the PE stage's own seeds; tuning: edge flags
    log:
        "results/{scale}/collapsed_ops/logs/collapsed_ops_eval.log",
    benchmark:
        "results/{scale}/collapsed_ops/benchmarks/collapsed_ops_eval.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule collapsed_ops_figures:
    input:
        unpack(lambda wildcards: collapsed_ops_stage_files(wildcards.scale)),
        **rules.collapsed_ops_data.output,
    output:
        spectra=report("results/{scale}/collapsed_ops/figures/spectra.png", caption="../../report/captions/collapsed_ops.rst", category="collapsed_ops"),
        operator=report("results/{scale}/collapsed_ops/figures/operator.png", caption="../../report/captions/collapsed_ops.rst", category="collapsed_ops"),
        smoothing=report("results/{scale}/collapsed_ops/figures/smoothing.png", caption="../../report/captions/collapsed_ops.rst", category="collapsed_ops"),
        clustering=report("results/{scale}/collapsed_ops/figures/clustering.png", caption="../../report/captions/collapsed_ops.rst", category="collapsed_ops"),
        encodings=report("results/{scale}/collapsed_ops/figures/encodings.png", caption="../../report/captions/collapsed_ops.rst", category="collapsed_ops"),
    params:
        stage="collapsed_ops.figures",
        spec=paths_spec,
        settings=settings_of("collapsed_ops", "seeds", "coupling_weights", "hodge_weights", "cell_mass", "eps"),
    log:
        "results/{scale}/collapsed_ops/logs/collapsed_ops_figures.log",
    benchmark:
        "results/{scale}/collapsed_ops/benchmarks/collapsed_ops_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["collapsed_ops"] = {
    "metrics": rules.collapsed_ops_eval.output.metrics,
    "figures": list(rules.collapsed_ops_figures.output),
}
