# event2vec: events as Transformer tokens (resources/claims/event2vec.yaml).
# event2vec_data (every seed's own train/test set) -> event2vec_train (one job per arm: LR tuning on the first seed, ties to lr_default,
#   then every seed; the shuffled-timestamp control trains at event2vec's tuned rate, train.LR_FROM)
#   -> event2vec_eval -> event2vec_figures
from icmlrepro.papers.event2vec.workflow_inputs import event2vec_lr_source, event2vec_model_files


rule event2vec_data:
    output:
        events="results/{scale}/event2vec/data/events.parquet",
        samples="results/{scale}/event2vec/data/samples.parquet",
        summary="results/{scale}/event2vec/data/summary.json",
    params:
        stage="event2vec.data",
        spec=paths_spec,
        settings=settings_of("event2vec", "seeds", "sensor", "frames", "threshold", "threshold_sigma", "refractory_us",
                             "noise_hz", "denoise_us", "train_per_class", "val_per_class", "test_per_class",
                             "data_seed"),
    log:
        "results/{scale}/event2vec/logs/event2vec_data.log",
    benchmark:
        "results/{scale}/event2vec/benchmarks/event2vec_data.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (10 if wildcards.scale != "paper" else 120) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule event2vec_train:
    input:
        # the shuffled-timestamp control trains at event2vec's tuned rate (workflow_inputs.LR_FROM): named input "tuned"
        unpack(lambda wildcards: event2vec_lr_source(paper_settings(config, "event2vec", wildcards.scale), wildcards.arm)),
        events=rules.event2vec_data.output.events,
        samples=rules.event2vec_data.output.samples,
    output:
        models="results/{scale}/event2vec/train/{arm}/models.pt",
        tuning="results/{scale}/event2vec/train/{arm}/tuning.json",
    params:
        stage="event2vec.train",
        spec=paths_spec,
        settings=settings_of("event2vec", "seeds", "sensor", "d", "layers", "heads", "time_bins", "cnn_width", "point_width",
                             "steps", "batch", "lr_grid", "lr_default", "order_encoding", "cnn_norm", "event_budgets",
                             "max_events", "res_factors"),
    log:
        "results/{scale}/event2vec/logs/event2vec_train/{arm}.log",
    benchmark:
        "results/{scale}/event2vec/benchmarks/event2vec_train/{arm}.tsv"
    wildcard_constraints:
        arm="event2vec|event2vec_shuffled_t|frame_cnn|voxel_cnn|point_set",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 32000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule event2vec_eval:
    input:
        unpack(lambda wildcards: event2vec_model_files(paper_settings(config, "event2vec", wildcards.scale))),
        events=rules.event2vec_data.output.events,
        samples=rules.event2vec_data.output.samples,
    output:
        metrics="results/{scale}/event2vec/metrics.json",
        accuracy="results/{scale}/event2vec/eval/accuracy.parquet",
        speed="results/{scale}/event2vec/eval/speed.parquet",
    params:
        stage="event2vec.evaluate",
        spec=paths_spec,
        settings=settings_of("event2vec"),
    log:
        "results/{scale}/event2vec/logs/event2vec_eval.log",
    benchmark:
        "results/{scale}/event2vec/benchmarks/event2vec_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (3000 if wildcards.scale != "paper" else 32000) * attempt,
        runtime=lambda wildcards, attempt: (20 if wildcards.scale != "paper" else 6 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule event2vec_figures:
    input:
        accuracy=rules.event2vec_eval.output.accuracy,
        speed=rules.event2vec_eval.output.speed,
    output:
        events=report("results/{scale}/event2vec/figures/accuracy_vs_events.png", caption="../../report/captions/event2vec.rst", category="event2vec"),
        resolution=report("results/{scale}/event2vec/figures/accuracy_vs_resolution.png", caption="../../report/captions/event2vec.rst", category="event2vec"),
        speed=report("results/{scale}/event2vec/figures/speed.png", caption="../../report/captions/event2vec.rst", category="event2vec"),
    params:
        stage="event2vec.figures",
        spec=paths_spec,
        settings=settings_of("event2vec"),
    log:
        "results/{scale}/event2vec/logs/event2vec_figures.log",
    benchmark:
        "results/{scale}/event2vec/benchmarks/event2vec_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["event2vec"] = {
    "metrics": rules.event2vec_eval.output.metrics,
    "figures": list(rules.event2vec_figures.output),
}
