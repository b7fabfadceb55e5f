# B-Spar: RL image retouching under sparse binary feedback (resources/claims/bspar.yaml).
# bspar_data -> bspar_train (one job per arm, all seeds inside) -> bspar_eval -> bspar_figures
from icmlrepro.papers.bspar.workflow_inputs import bspar_run_files


rule bspar_data:
    output:
        tasks="results/{scale}/bspar/data/tasks.npz",
        summary="results/{scale}/bspar/data/summary.json",
    params:
        stage="bspar.data",
        spec=paths_spec,
        settings=settings_of("bspar", "seeds", "size", "n_train", "n_val", "n_test", "p_extra_degradation",
                             "judge_threshold"),
    log:
        "results/{scale}/bspar/logs/bspar_data.log",
    benchmark:
        "results/{scale}/bspar/benchmarks/bspar_data.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule bspar_train:
    input:
        tasks=rules.bspar_data.output.tasks,
    output:
        runs="results/{scale}/bspar/train/{arm}/runs.pt",
    params:
        stage="bspar.train",
        spec=paths_spec,
        settings=settings_of("bspar", "seeds", "hidden", "lr", "lr_grid", "warm_rollouts", "warm_steps", "horizon",
                             "iterations", "batch", "eval_every", "judge_threshold", "judge_noise", "proxy_weight",
                             "prior_weight", "rm_alpha", "rm_every", "rm_buffer", "anchors", "anchor_weight",
                             "anchor_smoothing"),
    log:
        "results/{scale}/bspar/logs/bspar_train/{arm}.log",
    benchmark:
        "results/{scale}/bspar/benchmarks/bspar_train/{arm}.tsv"
    wildcard_constraints:
        arm="sparse|dense|bspar|bspar_no_prior|bspar_no_bayes|bspar_no_anchor",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule bspar_eval:
    input:
        unpack(lambda wildcards: bspar_run_files(paper_settings(config, "bspar", wildcards.scale))),
        tasks=rules.bspar_data.output.tasks,
    output:
        metrics="results/{scale}/bspar/metrics.json",
        per_image="results/{scale}/bspar/eval/per_image.parquet",
        curves="results/{scale}/bspar/eval/curves.parquet",
        examples="results/{scale}/bspar/eval/examples.npz",
    params:
        stage="bspar.evaluate",
        spec=paths_spec,
        settings=settings_of("bspar"),
    log:
        "results/{scale}/bspar/logs/bspar_eval.log",
    benchmark:
        "results/{scale}/bspar/benchmarks/bspar_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule bspar_figures:
    input:
        per_image=rules.bspar_eval.output.per_image,
        curves=rules.bspar_eval.output.curves,
        examples=rules.bspar_eval.output.examples,
    output:
        examples=report("results/{scale}/bspar/figures/before_after.png", caption="../../report/captions/bspar.rst", category="bspar"),
        curves=report("results/{scale}/bspar/figures/training_curves.png", caption="../../report/captions/bspar.rst", category="bspar"),
        bars=report("results/{scale}/bspar/figures/ablation_bars.png", caption="../../report/captions/bspar.rst", category="bspar"),
    params:
        stage="bspar.figures",
        spec=paths_spec,
        settings=settings_of("bspar", "arms"),
    log:
        "results/{scale}/bspar/logs/bspar_figures.log",
    benchmark:
        "results/{scale}/bspar/benchmarks/bspar_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["bspar"] = {
    "metrics": rules.bspar_eval.output.metrics,
    "figures": list(rules.bspar_figures.output),
}
