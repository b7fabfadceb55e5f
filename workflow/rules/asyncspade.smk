# AsyncSpade: asynchronous query-aware sparse decoding (resources/claims/asyncspade.yaml).
# lm_train (the substrate's target model; AsyncSpade trains nothing of its own: the query predictor
# is fitted online) -> asyncspade_data (seed) -> asyncspade_predict (seed) / asyncspade_accuracy (seed)
# and asyncspade_tpot, asyncspade_kernels -> asyncspade_eval -> asyncspade_figures. Decoding and kernel rules
# are GPU-tagged: their stages compute on core.device.torch_device() (CUDA when the job was given a GPU).
from icmlrepro.papers.asyncspade.workflow_inputs import asyncspade_tables, asyncspade_tpot_runtime


rule asyncspade_data:
    output:
        eval="results/{scale}/asyncspade/data/seed{seed}/eval.parquet",
        traces="results/{scale}/asyncspade/data/seed{seed}/traces.parquet",
    params:
        stage="asyncspade.data",
        spec=paths_spec,
        settings=settings_of("asyncspade", "families", "n_eval", "eval_steps_range", "prediction"),
    log:
        "results/{scale}/asyncspade/logs/asyncspade_data/seed{seed}.log",
    benchmark:
        "results/{scale}/asyncspade/benchmarks/asyncspade_data/seed{seed}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule asyncspade_predict:
    input:
        traces=rules.asyncspade_data.output.traces,
        target="results/{scale}/lm/models/target",
    output:
        table="results/{scale}/asyncspade/prediction/seed{seed}.parquet",
    params:
        stage="asyncspade.prediction",
        spec=paths_spec,
        settings=settings_of("asyncspade", "prediction", "order", "ridge_lambda", "dense_layers"),
    log:
        "results/{scale}/asyncspade/logs/asyncspade_predict/seed{seed}.log",
    benchmark:
        "results/{scale}/asyncspade/benchmarks/asyncspade_predict/seed{seed}.tsv"
    priority: LM_CONSUMER_PRIORITY  # reads the LM substrate: the critical path
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE


rule asyncspade_accuracy:
    input:
        eval=rules.asyncspade_data.output.eval,
        target="results/{scale}/lm/models/target",
    output:
        table="results/{scale}/asyncspade/accuracy/seed{seed}.parquet",
    params:
        stage="asyncspade.accuracy",
        spec=paths_spec,
        settings=settings_of("asyncspade", "budgets", "page_size", "window", "order", "ridge_lambda",
                             "dense_layers", "min_pages", "eval_batch_size", "max_new_tokens"),
    log:
        "results/{scale}/asyncspade/logs/asyncspade_accuracy/seed{seed}.log",
    benchmark:
        "results/{scale}/asyncspade/benchmarks/asyncspade_accuracy/seed{seed}.tsv"
    priority: LM_CONSUMER_PRIORITY  # reads the LM substrate: the critical path
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE


rule asyncspade_tpot:
    output:
        table="results/{scale}/asyncspade/tpot/tpot.parquet",
    params:
        stage="asyncspade.tpot",
        spec=paths_spec,
        settings=settings_of("asyncspade", "seeds", "tpot", "window", "order", "ridge_lambda", "dense_layers",
                             "min_pages"),
    log:
        "results/{scale}/asyncspade/logs/asyncspade_tpot.log",
    benchmark:
        "results/{scale}/asyncspade/benchmarks/asyncspade_tpot.tsv"
    threads: 2  # the decode loop and the selection worker, one core each
    resources:
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: asyncspade_tpot_runtime(paper_settings(config, "asyncspade", wildcards.scale)) * attempt,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE


rule asyncspade_kernels:
    output:
        kernels="results/{scale}/asyncspade/kernels/kernels.json",
        figure=report("results/{scale}/asyncspade/figures/kernels.png", caption="../../report/captions/asyncspade.rst", category="asyncspade"),
    params:
        stage="asyncspade.kernel_bench",
        spec=paths_spec,
        settings=settings_of("asyncspade", "seeds"),
    log:
        "results/{scale}/asyncspade/logs/asyncspade_kernels.log",
    benchmark:
        "results/{scale}/asyncspade/benchmarks/asyncspade_kernels.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 15 * attempt,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        TRITON_CPU_ENV + STAGE


rule asyncspade_eval:
    input:
        unpack(lambda wildcards: asyncspade_tables(paper_settings(config, "asyncspade", wildcards.scale))),
        tpot=rules.asyncspade_tpot.output.table,
        kernels=rules.asyncspade_kernels.output.kernels,
    output:
        metrics="results/{scale}/asyncspade/metrics.json",
    params:
        stage="asyncspade.evaluate",
        spec=paths_spec,
        settings=settings_of("asyncspade", "seeds", "window", "order", "tpot", "headline_budget"),
    log:
        "results/{scale}/asyncspade/logs/asyncspade_eval.log",
    benchmark:
        "results/{scale}/asyncspade/benchmarks/asyncspade_eval.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule asyncspade_figures:
    input:
        unpack(lambda wildcards: asyncspade_tables(paper_settings(config, "asyncspade", wildcards.scale))),
        tpot=rules.asyncspade_tpot.output.table,
    output:
        tpot=report("results/{scale}/asyncspade/figures/tpot_vs_context.png", caption="../../report/captions/asyncspade.rst", category="asyncspade"),
        accuracy=report("results/{scale}/asyncspade/figures/accuracy_vs_budget.png", caption="../../report/captions/asyncspade.rst", category="asyncspade"),
        recall=report("results/{scale}/asyncspade/figures/recall_vs_window.png", caption="../../report/captions/asyncspade.rst", category="asyncspade"),
    params:
        stage="asyncspade.figures",
        spec=paths_spec,
        settings=settings_of("asyncspade"),
    log:
        "results/{scale}/asyncspade/logs/asyncspade_figures.log",
    benchmark:
        "results/{scale}/asyncspade/benchmarks/asyncspade_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["asyncspade"] = {
    "metrics": rules.asyncspade_eval.output.metrics,
    "figures": list(rules.asyncspade_figures.output) + [rules.asyncspade_kernels.output.figure],
}
