# ML-Embed: 3-D Matryoshka learning (resources/claims/mlembed.yaml).
# mlembed_data (every seed's synthetic languages) -> mlembed_train (one job per arm: LR tuned on the first
# seed, then every seed) -> mlembed_eval -> mlembed_figures
from icmlrepro.papers.mlembed.workflow_inputs import mlembed_model_files


rule mlembed_data:
    output:
        pairs="results/{scale}/mlembed/data/pairs.parquet",
        languages="results/{scale}/mlembed/data/languages.parquet",
        concepts="results/{scale}/mlembed/data/concepts.parquet",
        summary="results/{scale}/mlembed/data/summary.json",
    params:
        stage="mlembed.data",
        spec=paths_spec,
        settings=settings_of("mlembed", "seeds", "n_high", "n_low", "n_syllables", "n_atoms", "phrase_len",
                             "n_concept_sets", "n_test_sets", "n_val_sets", "low_fraction"),
    log:
        "results/{scale}/mlembed/logs/mlembed_data.log",
    benchmark:
        "results/{scale}/mlembed/benchmarks/mlembed_data.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule mlembed_train:
    input:
        pairs=rules.mlembed_data.output.pairs,
        concepts=rules.mlembed_data.output.concepts,
        languages=rules.mlembed_data.output.languages,
    output:
        model="results/{scale}/mlembed/train/{arm}/models.pt",
    params:
        stage="mlembed.train",
        spec=paths_spec,
        settings=settings_of("mlembed", "seeds", "n_high", "n_low", "n_syllables", "n_atoms", "phrase_len",
                             "d", "layers", "heads", "ff", "steps", "batch", "hard_negatives", "lr", "lr_grid",
                             "tau", "smallest_dim", "ranks"),
    log:
        "results/{scale}/mlembed/logs/mlembed_train/{arm}.log",
    benchmark:
        "results/{scale}/mlembed/benchmarks/mlembed_train/{arm}.tsv"
    wildcard_constraints:
        arm="plain|mrl|mrl_mll|3dml|3dml_highres",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 48 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule mlembed_eval:
    input:
        unpack(lambda wildcards: mlembed_model_files(paper_settings(config, "mlembed", wildcards.scale))),
        pairs=rules.mlembed_data.output.pairs,
        concepts=rules.mlembed_data.output.concepts,
    output:
        metrics="results/{scale}/mlembed/metrics.json",
        grid="results/{scale}/mlembed/eval/grid.parquet",
        costs="results/{scale}/mlembed/eval/costs.parquet",
    params:
        stage="mlembed.evaluate",
        spec=paths_spec,
        settings=settings_of("mlembed"),
    log:
        "results/{scale}/mlembed/logs/mlembed_eval.log",
    benchmark:
        "results/{scale}/mlembed/benchmarks/mlembed_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule mlembed_figures:
    input:
        grid=rules.mlembed_eval.output.grid,
    output:
        axes=report("results/{scale}/mlembed/figures/recall_along_axes.png", caption="../../report/captions/mlembed.rst", category="mlembed"),
        frontier=report("results/{scale}/mlembed/figures/quality_cost_frontier.png", caption="../../report/captions/mlembed.rst", category="mlembed"),
        groups=report("results/{scale}/mlembed/figures/language_groups.png", caption="../../report/captions/mlembed.rst", category="mlembed"),
    params:
        stage="mlembed.figures",
        spec=paths_spec,
        settings=settings_of("mlembed", "ranks", "layers", "d"),
    log:
        "results/{scale}/mlembed/logs/mlembed_figures.log",
    benchmark:
        "results/{scale}/mlembed/benchmarks/mlembed_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["mlembed"] = {
    "metrics": rules.mlembed_eval.output.metrics,
    "figures": list(rules.mlembed_figures.output),
}
