# EMBGuard: action-conditioned physical-safety guard (resources/claims/embguard.yaml).
# embguard_data (every seed's own train/test set) -> embguard_train (one job per arm, seeds inside) -> embguard_eval -> embguard_figures
from icmlrepro.papers.embguard.workflow_inputs import embguard_prediction_files


rule embguard_data:
    output:
        pairs="results/{scale}/embguard/data/pairs.parquet",
        images="results/{scale}/embguard/data/images.npz",
        actions="results/{scale}/embguard/data/action_embeddings.npy",
        summary="results/{scale}/embguard/data/summary.json",
    params:
        stage="embguard.data",
        spec=paths_spec,
        settings=settings_of("embguard", "seeds", "grid", "cell", "n_train_base", "n_test_base", "test_fraction",
                             "min_distractors", "max_distractors", "max_inert", "contrast_min",
                             "action_encoder_path"),
    log:
        "results/{scale}/embguard/logs/embguard_data.log",
    benchmark:
        "results/{scale}/embguard/benchmarks/embguard_data.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 8000) * attempt,
        runtime=lambda wildcards, attempt: (10 if wildcards.scale != "paper" else 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule embguard_train:
    input:
        pairs=rules.embguard_data.output.pairs,
        images=rules.embguard_data.output.images,
        actions=rules.embguard_data.output.actions,
    output:
        model="results/{scale}/embguard/train/{arm}/models.pt",
        predictions="results/{scale}/embguard/train/{arm}/predictions.parquet",
    params:
        stage="embguard.train",
        spec=paths_spec,
        settings=settings_of("embguard", "seeds", "grid", "width", "hidden", "train_pairs", "epochs", "batch", "lr"),
    log:
        "results/{scale}/embguard/logs/embguard_train/{arm}.log",
    benchmark:
        "results/{scale}/embguard/benchmarks/embguard_train/{arm}.tsv"
    wildcard_constraints:
        arm="guard|guard_no_removal|guard_no_action_aug|guard_shuffled|observation_only|guard_confounded|salience",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (20 if wildcards.scale != "paper" else 12 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule embguard_eval:
    input:
        unpack(lambda wildcards: embguard_prediction_files(paper_settings(config, "embguard", wildcards.scale))),
        pairs=rules.embguard_data.output.pairs,
    output:
        metrics="results/{scale}/embguard/metrics.json",
        scores="results/{scale}/embguard/eval/scores.parquet",
        examples="results/{scale}/embguard/eval/examples.parquet",
    params:
        stage="embguard.evaluate",
        spec=paths_spec,
        settings=settings_of("embguard"),
    log:
        "results/{scale}/embguard/logs/embguard_eval.log",
    benchmark:
        "results/{scale}/embguard/benchmarks/embguard_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule embguard_figures:
    input:
        scores=rules.embguard_eval.output.scores,
        examples=rules.embguard_eval.output.examples,
        images=rules.embguard_data.output.images,
    output:
        splits=report("results/{scale}/embguard/figures/split_accuracy_fpr.png", caption="../../report/captions/embguard.rst", category="embguard"),
        examples=report("results/{scale}/embguard/figures/example_scenes.png", caption="../../report/captions/embguard.rst", category="embguard"),
    params:
        stage="embguard.figures",
        spec=paths_spec,
        settings=settings_of("embguard", "arms"),
    log:
        "results/{scale}/embguard/logs/embguard_figures.log",
    benchmark:
        "results/{scale}/embguard/benchmarks/embguard_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["embguard"] = {
    "metrics": rules.embguard_eval.output.metrics,
    "figures": list(rules.embguard_figures.output),
}
