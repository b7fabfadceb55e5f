# TimesX: context-enriched multimodal forecasting benchmark (resources/claims/timesx.yaml).
# timesx_data -> timesx_statistical (once) + timesx_train (seed; the first seed tunes, the others read its rates)
# -> timesx_eval -> timesx_figures
from icmlrepro.papers.timesx.workflow_inputs import (timesx_data_files, timesx_eval_inputs, timesx_statistical_files,
                                                     timesx_tuning_input)


rule timesx_data:
    output:
        **timesx_data_files("{scale}"),
    params:
        stage="timesx.data",
        spec=paths_spec,
        settings=settings_of("timesx", "seeds", "max_series", "n_windows", "min_history", "max_events",
                             "event_threshold", "max_covariates", "synthetic_series", "synthetic_history"),
    log:
        "results/{scale}/timesx/logs/timesx_data.log",
    benchmark:
        "results/{scale}/timesx/benchmarks/timesx_data.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule timesx_statistical:
    input:
        **timesx_data_files("{scale}"),
    output:
        **timesx_statistical_files("{scale}"),
    params:
        stage="timesx.statistical",
        spec=paths_spec,
        settings=settings_of("timesx", "arima_orders", "stat_history"),
    log:
        "results/{scale}/timesx/logs/timesx_statistical.log",
    benchmark:
        "results/{scale}/timesx/benchmarks/timesx_statistical.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 1500 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule timesx_train:
    input:
        unpack(lambda wildcards: timesx_tuning_input(paper_settings(config, "timesx", wildcards.scale), wildcards.seed)),
    output:
        models="results/{scale}/timesx/train/seed{seed}/models.pkl",
    params:
        stage="timesx.train",
        spec=paths_spec,
        settings=settings_of("timesx", "corpus_windows", "val_windows", "history", "p_announce", "text_features",
                             "text_slots", "hidden", "lr_grid", "tune_seeds",
                             "epochs", "batch_size", "lr", "max_events", "event_threshold", "max_covariates"),
    log:
        "results/{scale}/timesx/logs/timesx_train/seed{seed}.log",
    benchmark:
        "results/{scale}/timesx/benchmarks/timesx_train/seed{seed}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule timesx_eval:
    input:
        unpack(lambda wildcards: timesx_eval_inputs(paper_settings(config, "timesx", wildcards.scale))),
    output:
        metrics="results/{scale}/timesx/metrics.json",
        scores="results/{scale}/timesx/eval/scores.parquet",
        forecasts="results/{scale}/timesx/eval/forecasts.parquet",
    params:
        stage="timesx.evaluate",
        spec=paths_spec,
        settings=settings_of("timesx"),
    log:
        "results/{scale}/timesx/logs/timesx_eval.log",
    benchmark:
        "results/{scale}/timesx/benchmarks/timesx_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule timesx_figures:
    input:
        scores=rules.timesx_eval.output.scores,
        forecasts=rules.timesx_eval.output.forecasts,
        real_obs="results/{scale}/timesx/data/real_obs.parquet",
        real_windows="results/{scale}/timesx/data/real_windows.parquet",
    output:
        mase=report("results/{scale}/timesx/figures/mase_by_method.png", caption="../../report/captions/timesx.rst", category="timesx"),
        ranks=report("results/{scale}/timesx/figures/rank_transfer.png", caption="../../report/captions/timesx.rst", category="timesx"),
        example=report("results/{scale}/timesx/figures/example_forecast.png", caption="../../report/captions/timesx.rst", category="timesx"),
    params:
        stage="timesx.figures",
        spec=paths_spec,
        settings=settings_of("timesx", "history"),
    log:
        "results/{scale}/timesx/logs/timesx_figures.log",
    benchmark:
        "results/{scale}/timesx/benchmarks/timesx_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["timesx"] = {
    "metrics": rules.timesx_eval.output.metrics,
    "figures": list(rules.timesx_figures.output),
}
