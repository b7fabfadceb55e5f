# Graph alignment as a GNN benchmark and pre-training task (resources/claims/graph_alignment.yaml).
# graph_alignment_data -> graph_alignment_tune (per input: learning rate per model on the tuning stream)
#   -> graph_alignment_train (per seed: every model x source x noise, headline input (degree at default);
#      extra inputs (all-ones) at the main noise)
#   -> graph_alignment_transfer (PE regression, reconstruction) -> graph_alignment_eval -> graph_alignment_figures
from icmlrepro.papers.graph_alignment.workflow_inputs import (
    graph_alignment_encoder_files,
    graph_alignment_score_files,
    graph_alignment_tune_files,
)


rule graph_alignment_data:
    output:
        datasets="results/{scale}/graph_alignment/data/datasets.pt",
    params:
        stage="graph_alignment.data",
        spec=paths_spec,
        settings=settings_of("graph_alignment", "seeds", "sources", "noises", "n_nodes", "degree",
                             "n_train_pairs", "n_test_pairs", "main_noise", "tune", "transfer"),
    log:
        "results/{scale}/graph_alignment/logs/graph_alignment_data.log",
    benchmark:
        "results/{scale}/graph_alignment/benchmarks/graph_alignment_data.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule graph_alignment_tune:
    input:
        datasets=rules.graph_alignment_data.output.datasets,
    output:
        table="results/{scale}/graph_alignment/tune/{inputs}.parquet",
    params:
        stage="graph_alignment.tune",
        spec=paths_spec,
        settings=settings_of("graph_alignment", "models", "hidden", "layers", "heads", "max_degree", "epochs",
                             "batch_size", "lr_grid", "tune"),
    log:
        "results/{scale}/graph_alignment/logs/graph_alignment_tune/{inputs}.log",
    benchmark:
        "results/{scale}/graph_alignment/benchmarks/graph_alignment_tune/{inputs}.tsv"
    wildcard_constraints:
        inputs="ones|degree",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 1440) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule graph_alignment_train:
    input:
        unpack(lambda wildcards: graph_alignment_tune_files(paper_settings(config, "graph_alignment", wildcards.scale))),
    output:
        scores="results/{scale}/graph_alignment/train/seed{seed}/scores.parquet",
        encoder="results/{scale}/graph_alignment/train/seed{seed}/encoder.pt",
    params:
        stage="graph_alignment.train",
        spec=paths_spec,
        settings=settings_of("graph_alignment", "sources", "noises", "models", "hidden", "layers", "heads",
                             "max_degree", "epochs", "batch_size", "input", "extra_inputs", "main_noise",
                             "transfer"),
    log:
        "results/{scale}/graph_alignment/logs/graph_alignment_train/seed{seed}.log",
    benchmark:
        "results/{scale}/graph_alignment/benchmarks/graph_alignment_train/seed{seed}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 1440) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule graph_alignment_transfer:
    input:
        unpack(lambda wildcards: graph_alignment_encoder_files(paper_settings(config, "graph_alignment", wildcards.scale))),
    output:
        transfer="results/{scale}/graph_alignment/transfer/transfer.parquet",
    params:
        stage="graph_alignment.transfer",
        spec=paths_spec,
        settings=settings_of("graph_alignment", "seeds", "hidden", "layers", "heads", "max_degree", "batch_size",
                             "input", "transfer"),
    log:
        "results/{scale}/graph_alignment/logs/graph_alignment_transfer.log",
    benchmark:
        "results/{scale}/graph_alignment/benchmarks/graph_alignment_transfer.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 1440) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule graph_alignment_eval:
    input:
        unpack(lambda wildcards: graph_alignment_score_files(paper_settings(config, "graph_alignment", wildcards.scale))),
    output:
        metrics="results/{scale}/graph_alignment/metrics.json",
        scores="results/{scale}/graph_alignment/eval/scores.parquet",
        stability="results/{scale}/graph_alignment/eval/stability.parquet",
    params:
        stage="graph_alignment.evaluate",
        spec=paths_spec,
        settings=settings_of("graph_alignment"),
    log:
        "results/{scale}/graph_alignment/logs/graph_alignment_eval.log",
    benchmark:
        "results/{scale}/graph_alignment/benchmarks/graph_alignment_eval.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule graph_alignment_figures:
    input:
        scores=rules.graph_alignment_eval.output.scores,
        stability=rules.graph_alignment_eval.output.stability,
        transfer="results/{scale}/graph_alignment/transfer/transfer.parquet",
    output:
        accuracy=report("results/{scale}/graph_alignment/figures/accuracy_vs_difficulty.png", caption="../../report/captions/graph_alignment.rst", category="graph_alignment"),
        inputs=report("results/{scale}/graph_alignment/figures/inputs_at_main_noise.png", caption="../../report/captions/graph_alignment.rst", category="graph_alignment"),
        stability=report("results/{scale}/graph_alignment/figures/rank_stability_vs_difficulty.png", caption="../../report/captions/graph_alignment.rst", category="graph_alignment"),
        transfer=report("results/{scale}/graph_alignment/figures/transfer.png", caption="../../report/captions/graph_alignment.rst", category="graph_alignment"),
    params:
        stage="graph_alignment.figures",
        spec=paths_spec,
        settings=settings_of("graph_alignment"),
    log:
        "results/{scale}/graph_alignment/logs/graph_alignment_figures.log",
    benchmark:
        "results/{scale}/graph_alignment/benchmarks/graph_alignment_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["graph_alignment"] = {
    "metrics": rules.graph_alignment_eval.output.metrics,
    "figures": list(rules.graph_alignment_figures.output),
}
