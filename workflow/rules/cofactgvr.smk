# CofactGVR: counterfactual evidence rewards + Q-PAS for grounded VQA (resources/claims/cofactgvr.yaml).
# cofactgvr_data -> cofactgvr_train (one job per arm: the lr grid on the first seed, then all seeds, inside)
#   -> cofactgvr_eval -> cofactgvr_figures
from icmlrepro.papers.cofactgvr.workflow_inputs import cofactgvr_train_files


rule cofactgvr_data:
    output:
        train="results/{scale}/cofactgvr/data/train.npz",
        val="results/{scale}/cofactgvr/data/val.npz",
        test_id="results/{scale}/cofactgvr/data/test_id.npz",
        test_broken="results/{scale}/cofactgvr/data/test_broken.npz",
        summary="results/{scale}/cofactgvr/data/summary.json",
    params:
        stage="cofactgvr.data",
        spec=paths_spec,
        settings=settings_of("cofactgvr", "seeds", "grid", "n_objects", "n_values", "cue_rate", "noise",
                             "n_train", "n_val", "n_test"),
    log:
        "results/{scale}/cofactgvr/logs/cofactgvr_data.log",
    benchmark:
        "results/{scale}/cofactgvr/benchmarks/cofactgvr_data.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1000 if wildcards.scale != "paper" else 8000) * attempt,
        runtime=lambda wildcards, attempt: 10 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule cofactgvr_train:
    input:
        train=rules.cofactgvr_data.output.train,
        val=rules.cofactgvr_data.output.val,
    output:
        model="results/{scale}/cofactgvr/train/{arm}/policies.pt",
        log="results/{scale}/cofactgvr/train/{arm}/log.parquet",
        tuning="results/{scale}/cofactgvr/train/{arm}/tuning.json",
    params:
        stage="cofactgvr.train",
        spec=paths_spec,
        settings=settings_of("cofactgvr", "seeds", "n_values", "hidden", "sft_lr", "lr_grid", "lr_default", "n_sft", "sft_steps", "iterations",
                             "prompts", "group_size", "epochs", "minibatches", "clip_eps", "beta", "format_weight",
                             "cf_lambda", "qpas_quantile"),
    log:
        "results/{scale}/cofactgvr/logs/cofactgvr_train/{arm}.log",
    benchmark:
        "results/{scale}/cofactgvr/benchmarks/cofactgvr_train/{arm}.tsv"
    wildcard_constraints:
        arm="grpo|grpo_cf|grpo_qpas|cofactgvr|grpo_cfshuf|grpo_cfrand",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule cofactgvr_eval:
    input:
        unpack(lambda wildcards: cofactgvr_train_files(paper_settings(config, "cofactgvr", wildcards.scale))),
        test_id=rules.cofactgvr_data.output.test_id,
        test_broken=rules.cofactgvr_data.output.test_broken,
    output:
        metrics="results/{scale}/cofactgvr/metrics.json",
        scores="results/{scale}/cofactgvr/eval/scores.parquet",
        curves="results/{scale}/cofactgvr/eval/curves.parquet",
        predictions="results/{scale}/cofactgvr/eval/predictions.parquet",
    params:
        stage="cofactgvr.evaluate",
        spec=paths_spec,
        settings=settings_of("cofactgvr"),
    log:
        "results/{scale}/cofactgvr/logs/cofactgvr_eval.log",
    benchmark:
        "results/{scale}/cofactgvr/benchmarks/cofactgvr_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule cofactgvr_figures:
    input:
        scores=rules.cofactgvr_eval.output.scores,
        curves=rules.cofactgvr_eval.output.curves,
        predictions=rules.cofactgvr_eval.output.predictions,
        test_broken=rules.cofactgvr_data.output.test_broken,
    output:
        arms=report("results/{scale}/cofactgvr/figures/arms.png", caption="../../report/captions/cofactgvr.rst", category="cofactgvr"),
        curves=report("results/{scale}/cofactgvr/figures/training_curves.png", caption="../../report/captions/cofactgvr.rst", category="cofactgvr"),
        examples=report("results/{scale}/cofactgvr/figures/evidence_examples.png", caption="../../report/captions/cofactgvr.rst", category="cofactgvr"),
    params:
        stage="cofactgvr.figures",
        spec=paths_spec,
        settings=settings_of("cofactgvr", "arms", "seeds", "grid", "n_values"),
    log:
        "results/{scale}/cofactgvr/logs/cofactgvr_figures.log",
    benchmark:
        "results/{scale}/cofactgvr/benchmarks/cofactgvr_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["cofactgvr"] = {
    "metrics": rules.cofactgvr_eval.output.metrics,
    "figures": list(rules.cofactgvr_figures.output),
}
