# Shared small-language-model substrate (workflow/icmlrepro/lm): lm_data -> lm_train (target, draft)
# -> lm_eval -> lm_figures. Papers that need a language model depend on lm_train's model directories.
# The substrate is the longest chain of the default DAG (lm_train target alone is ~11 min), so its
# jobs carry the highest priorities: Snakemake starts them first, other papers fill the other core.
# Every job takes one thread (issue 17, measured with workflow/scripts/lm_train_speed.py at default on
# a quiet 2-core machine, OMP_WAIT_POLICY=PASSIVE as in the jobs): the target's training loop runs
# 9.34 steps/s on 1 thread and 8.24 steps/s on 2 (107 vs 154 ms CPU per step); in the whole default
# DAG lm_train target took 704 s wall and 912 s CPU on 2 threads. A 2-thread job also waits until
# both cores are free at once, which a stream of 1-thread jobs rarely allows.
# Issue 42 (same script, 200 steps, 1 thread, ms CPU/step): base 117, foreach AdamW 118, foreach + clipping
# 120, eager attention 119, no attention mask 112 (right padding under a causal mask; not byte-identical),
# torch.compile 235 (400 steps, compile included). Padding is 0.18% of the tokens (length-sorted batches).
# Profile: matmuls 41%, elementwise mul 18%, sdpa 11%. Half the compute fails AsyncSpade's gate on full
# attention's accuracy (seed 0, steps 6-10: 3000 x 32 gives 0.34, 6000 x 16 gives 0.39, 6000 x 32 gives 0.61;
# the gate needs 0.42), so the recipe stays at 6000 x 32.
# Papers' rules that read the models carry LM_CONSUMER_PRIORITY.
LM_CONSUMER_PRIORITY = 10


rule lm_data:
    output:
        train="results/{scale}/lm/data/train.parquet",
        eval="results/{scale}/lm/data/eval.parquet",
        tokenizer=directory("results/{scale}/lm/data/tokenizer"),
    params:
        stage="lm.data",
        spec=paths_spec,
        settings=settings_of("lm", "seeds", "families", "n_train", "train_steps_range", "n_eval", "eval_steps_range"),
    log:
        "results/{scale}/lm/logs/lm_data.log",
    benchmark:
        "results/{scale}/lm/benchmarks/lm_data.tsv"
    priority: 100
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule lm_train:
    input:
        train=rules.lm_data.output.train,
        tokenizer=rules.lm_data.output.tokenizer,
    output:
        model=directory("results/{scale}/lm/models/{role}"),
        curve="results/{scale}/lm/train/{role}_curve.json",
    params:
        stage="lm.fit",
        spec=paths_spec,
        settings=settings_of("lm", "seeds", "sizes", "training", "pretrained"),
    log:
        "results/{scale}/lm/logs/lm_train/{role}.log",
    benchmark:
        "results/{scale}/lm/benchmarks/lm_train/{role}.tsv"
    wildcard_constraints:
        role="target|draft",
    priority: 90
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule lm_eval:
    input:
        eval=rules.lm_data.output.eval,
        target="results/{scale}/lm/models/target",
        draft="results/{scale}/lm/models/draft",
    output:
        metrics="results/{scale}/lm/metrics.json",
        table="results/{scale}/lm/eval/decoded.parquet",
    params:
        stage="lm.evaluate",
        spec=paths_spec,
        settings=settings_of("lm", "seeds", "eval_batch_size", "max_new_tokens"),
    log:
        "results/{scale}/lm/logs/lm_eval.log",
    benchmark:
        "results/{scale}/lm/benchmarks/lm_eval.tsv"
    priority: 60
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE


rule lm_figures:
    input:
        table=rules.lm_eval.output.table,
        curve_target="results/{scale}/lm/train/target_curve.json",
        curve_draft="results/{scale}/lm/train/draft_curve.json",
    output:
        curve="results/{scale}/lm/figures/training_curve.png",
        accuracy="results/{scale}/lm/figures/accuracy_vs_trace_length.png",
    params:
        stage="lm.figures",
        spec=paths_spec,
        settings=settings_of("lm", "seeds"),
    log:
        "results/{scale}/lm/logs/lm_figures.log",
    benchmark:
        "results/{scale}/lm/benchmarks/lm_figures.tsv"
    priority: 10
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE
