# CCC-reward GRPO for long-tailed numeric regression (resources/claims/ccc_grpo.yaml).
# ccc_grpo_data (every seed's own draw) -> ccc_grpo_sft (variant) -> ccc_grpo_rl (reward) -> ccc_grpo_eval -> ccc_grpo_figures
# One training job per arm loops over the seeds (learning rate picked from the grid on the first seed's
# validation MAE); each seed's model stays its own file. The seed list of those outputs is the run's scale's
# (config scale), so ask for another scale's files with --config scale=<it>.
from icmlrepro.papers.ccc_grpo.workflow_inputs import ccc_grpo_model_files, ccc_grpo_seed_files, ccc_grpo_sft_inputs

ccc_grpo_run_seeds = paper_settings(config, "ccc_grpo", SCALE)["seeds"]


rule ccc_grpo_data:
    output:
        images="results/{scale}/ccc_grpo/data/images.npz",
        regions="results/{scale}/ccc_grpo/data/regions.parquet",
        summary="results/{scale}/ccc_grpo/data/summary.json",
    params:
        stage="ccc_grpo.data",
        spec=paths_spec,
        settings=settings_of("ccc_grpo", "seeds", "y_max", "mode", "scale_left", "scale_right", "n_train",
                             "n_val_lt", "n_val_per_value", "n_test_per_value", "image_size", "latent_noise", "pixel_noise", "many_above",
                             "few_below"),
    log:
        "results/{scale}/ccc_grpo/logs/ccc_grpo_data.log",
    benchmark:
        "results/{scale}/ccc_grpo/benchmarks/ccc_grpo_data.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule ccc_grpo_sft:
    input:
        images=rules.ccc_grpo_data.output.images,
    output:
        **ccc_grpo_seed_files("results/{scale}/ccc_grpo/sft/{variant}", ccc_grpo_run_seeds),
        tuning="results/{scale}/ccc_grpo/sft/{variant}/tuning.json",
    params:
        stage="ccc_grpo.sft",
        spec=paths_spec,
        settings=settings_of("ccc_grpo", "seeds", "image_size", "model", "sft", "y_max"),
    log:
        "results/{scale}/ccc_grpo/logs/ccc_grpo_sft/{variant}.log",
    benchmark:
        "results/{scale}/ccc_grpo/benchmarks/ccc_grpo_sft/{variant}.tsv"
    wildcard_constraints:
        variant="sft|sft_soft|sft_balanced",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule ccc_grpo_rl:
    input:
        unpack(lambda wildcards: ccc_grpo_sft_inputs(paper_settings(config, "ccc_grpo", wildcards.scale))),
        images=rules.ccc_grpo_data.output.images,
    output:
        **ccc_grpo_seed_files("results/{scale}/ccc_grpo/rl/{reward}", ccc_grpo_run_seeds),
        tuning="results/{scale}/ccc_grpo/rl/{reward}/tuning.json",
    params:
        stage="ccc_grpo.rl",
        spec=paths_spec,
        settings=settings_of("ccc_grpo", "seeds", "image_size", "model", "rl", "y_max"),
    log:
        "results/{scale}/ccc_grpo/logs/ccc_grpo_rl/{reward}.log",
    benchmark:
        "results/{scale}/ccc_grpo/benchmarks/ccc_grpo_rl/{reward}.tsv"
    wildcard_constraints:
        reward="pointwise|ccc|ccc_solo",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (40 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule ccc_grpo_eval:
    input:
        unpack(lambda wildcards: ccc_grpo_model_files(paper_settings(config, "ccc_grpo", wildcards.scale))),
        images=rules.ccc_grpo_data.output.images,
        regions=rules.ccc_grpo_data.output.regions,
    output:
        metrics="results/{scale}/ccc_grpo/metrics.json",
        predictions="results/{scale}/ccc_grpo/eval/predictions.parquet",
        rl_log="results/{scale}/ccc_grpo/eval/rl_log.parquet",
        tuning="results/{scale}/ccc_grpo/eval/tuning.parquet",
    params:
        stage="ccc_grpo.evaluate",
        spec=paths_spec,
        settings=settings_of("ccc_grpo", "image_size", "model", "rewards", "seeds", "rl"),
    log:
        "results/{scale}/ccc_grpo/logs/ccc_grpo_eval.log",
    benchmark:
        "results/{scale}/ccc_grpo/benchmarks/ccc_grpo_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule ccc_grpo_figures:
    input:
        predictions=rules.ccc_grpo_eval.output.predictions,
        rl_log=rules.ccc_grpo_eval.output.rl_log,
        tuning=rules.ccc_grpo_eval.output.tuning,
        regions=rules.ccc_grpo_data.output.regions,
    output:
        regions=report("results/{scale}/ccc_grpo/figures/error_by_shot_region.png", caption="../../report/captions/ccc_grpo.rst", category="ccc_grpo"),
        scatter=report("results/{scale}/ccc_grpo/figures/predicted_vs_true.png", caption="../../report/captions/ccc_grpo.rst", category="ccc_grpo"),
        curves=report("results/{scale}/ccc_grpo/figures/grpo_curves.png", caption="../../report/captions/ccc_grpo.rst", category="ccc_grpo"),
        lr_grid=report("results/{scale}/ccc_grpo/figures/lr_grid.png", caption="../../report/captions/ccc_grpo.rst", category="ccc_grpo"),
    params:
        stage="ccc_grpo.figures",
        spec=paths_spec,
        settings=settings_of("ccc_grpo", "rewards"),
    log:
        "results/{scale}/ccc_grpo/logs/ccc_grpo_figures.log",
    benchmark:
        "results/{scale}/ccc_grpo/benchmarks/ccc_grpo_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["ccc_grpo"] = {
    "metrics": rules.ccc_grpo_eval.output.metrics,
    "figures": list(rules.ccc_grpo_figures.output),
}
