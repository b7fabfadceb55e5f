# RPG-Encoder: Repository Planning Graph encoding, localization and evolution (resources/claims/rpg_encoder.yaml).
# rpg_encoder_data -> rpg_encoder_train (encode) -> rpg_encoder_issues -> rpg_encoder_localize
#   -> rpg_encoder_evolve -> rpg_encoder_eval -> rpg_encoder_figures


rule rpg_encoder_data:
    output:
        sources="results/{scale}/rpg_encoder/data/sources.parquet",
        inventory="results/{scale}/rpg_encoder/data/inventory.parquet",
        entries="results/{scale}/rpg_encoder/data/changelog_entries.parquet",
        releases="results/{scale}/rpg_encoder/data/releases.parquet",
        provenance="results/{scale}/rpg_encoder/data/provenance.json",
    params:
        stage="rpg_encoder.data",
        spec=paths_spec,
        settings=settings_of("rpg_encoder", "repos", "stdlib_include", "news", "news_sections", "releases"),
    log:
        "results/{scale}/rpg_encoder/logs/rpg_encoder_data.log",
    benchmark:
        "results/{scale}/rpg_encoder/benchmarks/rpg_encoder_data.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rpg_encoder_train:
    input:
        sources=rules.rpg_encoder_data.output.sources,
    output:
        nodes="results/{scale}/rpg_encoder/graph/nodes.parquet",
        edges="results/{scale}/rpg_encoder/graph/edges.parquet",
        stats="results/{scale}/rpg_encoder/graph/encode_stats.parquet",
    params:
        stage="rpg_encoder.encode",
        spec=paths_spec,
        settings=settings_of("rpg_encoder", "repos", "lifting", "seeds"),
    log:
        "results/{scale}/rpg_encoder/logs/rpg_encoder_train.log",
    benchmark:
        "results/{scale}/rpg_encoder/benchmarks/rpg_encoder_train.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rpg_encoder_issues:
    input:
        nodes=rules.rpg_encoder_train.output.nodes,
        edges=rules.rpg_encoder_train.output.edges,
        entries=rules.rpg_encoder_data.output.entries,
    output:
        synthetic="results/{scale}/rpg_encoder/tasks/synthetic.parquet",
        changelog="results/{scale}/rpg_encoder/tasks/changelog.parquet",
    params:
        stage="rpg_encoder.issues",
        spec=paths_spec,
        settings=settings_of("rpg_encoder", "repos", "tasks", "news_sections", "seeds"),
    log:
        "results/{scale}/rpg_encoder/logs/rpg_encoder_issues.log",
    benchmark:
        "results/{scale}/rpg_encoder/benchmarks/rpg_encoder_issues.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rpg_encoder_localize:
    input:
        nodes=rules.rpg_encoder_train.output.nodes,
        edges=rules.rpg_encoder_train.output.edges,
        synthetic=rules.rpg_encoder_issues.output.synthetic,
        changelog=rules.rpg_encoder_issues.output.changelog,
    output:
        ranks="results/{scale}/rpg_encoder/localize/ranks.parquet",
        tuning="results/{scale}/rpg_encoder/localize/tuning.parquet",
        timing="results/{scale}/rpg_encoder/localize/timing.parquet",
    params:
        stage="rpg_encoder.localize",
        spec=paths_spec,
        settings=settings_of("rpg_encoder", "repos", "tuning", "fixed", "seeds"),
    log:
        "results/{scale}/rpg_encoder/logs/rpg_encoder_localize.log",
    benchmark:
        "results/{scale}/rpg_encoder/benchmarks/rpg_encoder_localize.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rpg_encoder_evolve:
    input:
        sources=rules.rpg_encoder_data.output.sources,
        releases=rules.rpg_encoder_data.output.releases,
        tuning=rules.rpg_encoder_localize.output.tuning,
    output:
        releases="results/{scale}/rpg_encoder/evolve/releases.parquet",
        equality="results/{scale}/rpg_encoder/evolve/equality.parquet",
        commits="results/{scale}/rpg_encoder/evolve/commits.parquet",
    params:
        stage="rpg_encoder.evolve",
        spec=paths_spec,
        settings=settings_of("rpg_encoder", "lifting", "tasks", "fixed", "evolution", "seeds"),
    log:
        "results/{scale}/rpg_encoder/logs/rpg_encoder_evolve.log",
    benchmark:
        "results/{scale}/rpg_encoder/benchmarks/rpg_encoder_evolve.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rpg_encoder_eval:
    input:
        ranks=rules.rpg_encoder_localize.output.ranks,
        timing=rules.rpg_encoder_localize.output.timing,
        tuning=rules.rpg_encoder_localize.output.tuning,
        changelog=rules.rpg_encoder_issues.output.changelog,
        inventory=rules.rpg_encoder_data.output.inventory,
        nodes=rules.rpg_encoder_train.output.nodes,
        stats=rules.rpg_encoder_train.output.stats,
        releases=rules.rpg_encoder_evolve.output.releases,
        equality=rules.rpg_encoder_evolve.output.equality,
        commits=rules.rpg_encoder_evolve.output.commits,
    output:
        metrics="results/{scale}/rpg_encoder/metrics.json",
        accuracy="results/{scale}/rpg_encoder/eval/accuracy.parquet",
        coverage="results/{scale}/rpg_encoder/eval/coverage.parquet",
    params:
        stage="rpg_encoder.evaluate",
        spec=paths_spec,
        settings=settings_of("rpg_encoder"),
    log:
        "results/{scale}/rpg_encoder/logs/rpg_encoder_eval.log",
    benchmark:
        "results/{scale}/rpg_encoder/benchmarks/rpg_encoder_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule rpg_encoder_figures:
    input:
        accuracy=rules.rpg_encoder_eval.output.accuracy,
        coverage=rules.rpg_encoder_eval.output.coverage,
        releases=rules.rpg_encoder_evolve.output.releases,
        commits=rules.rpg_encoder_evolve.output.commits,
    output:
        localization=report("results/{scale}/rpg_encoder/figures/localization.png", caption="../../report/captions/rpg_encoder.rst", category="rpg_encoder"),
        releases=report("results/{scale}/rpg_encoder/figures/release_costs.png", caption="../../report/captions/rpg_encoder.rst", category="rpg_encoder"),
        scaling=report("results/{scale}/rpg_encoder/figures/cost_vs_size.png", caption="../../report/captions/rpg_encoder.rst", category="rpg_encoder"),
        coverage=report("results/{scale}/rpg_encoder/figures/coverage.png", caption="../../report/captions/rpg_encoder.rst", category="rpg_encoder"),
    params:
        stage="rpg_encoder.figures",
        spec=paths_spec,
        settings=settings_of("rpg_encoder", "repos"),
    log:
        "results/{scale}/rpg_encoder/logs/rpg_encoder_figures.log",
    benchmark:
        "results/{scale}/rpg_encoder/benchmarks/rpg_encoder_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["rpg_encoder"] = {
    "metrics": rules.rpg_encoder_eval.output.metrics,
    "figures": list(rules.rpg_encoder_figures.output),
}
