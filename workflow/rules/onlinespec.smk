# OnlineSPEC: draft models that learn online from verification feedback (resources/claims/onlinespec.yaml).
# lm_train (target; the substrate draft only lends its architecture) -> onlinespec_draft (OnlineSPEC's own
# offline draft, trained on offline_draft.families only, so the stream's other families are new to it)
# and onlinespec_stream (seed; prompts + the target's verification
# feedback) -> onlinespec_tune (tuning stream, one job per learning arm: its effective step, interior or at
# a grid edge) ->
# onlinespec_train (seed: every arm through the stream, timed) -> onlinespec_eval -> onlinespec_figures.
# Decoding rules are GPU-tagged.
from icmlrepro.papers.onlinespec.workflow_inputs import (
    onlinespec_learning,
    onlinespec_tables,
    onlinespec_tuned_arms,
    onlinespec_tuned_steps,
)


rule onlinespec_stream:
    input:
        target="results/{scale}/lm/models/target",
    output:
        stream="results/{scale}/onlinespec/stream/seed{seed}.parquet",
    params:
        stage="onlinespec.stream",
        spec=paths_spec,
        settings=settings_of("onlinespec", "schedule", "chunks_per_phase", "chunk_size", "steps_range",
                             "max_new_tokens", "feedback_batch_size"),
    log:
        "results/{scale}/onlinespec/logs/onlinespec_stream/seed{seed}.log",
    benchmark:
        "results/{scale}/onlinespec/benchmarks/onlinespec_stream/seed{seed}.tsv"
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


rule onlinespec_draft:
    input:
        train="results/{scale}/lm/data/train.parquet",
        tokenizer="results/{scale}/lm/data/tokenizer",
        substrate_draft="results/{scale}/lm/models/draft",  # its config.json: the architecture, not the weights
    output:
        model=directory("results/{scale}/onlinespec/draft/model"),
        curve="results/{scale}/onlinespec/draft/curve.json",
    params:
        stage="onlinespec.draft",
        spec=paths_spec,
        settings=settings_of("onlinespec", "seeds", "offline_draft"),
    log:
        "results/{scale}/onlinespec/logs/onlinespec_draft.log",
    benchmark:
        "results/{scale}/onlinespec/benchmarks/onlinespec_draft.tsv"
    priority: LM_CONSUMER_PRIORITY  # reads the LM substrate: the critical path
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        ENV
    shell:
        STAGE


rule onlinespec_tune:
    input:
        stream=rules.onlinespec_stream.output.stream,
        target="results/{scale}/lm/models/target",
        draft=rules.onlinespec_draft.output.model,
    output:
        steps="results/{scale}/onlinespec/tune/seed{seed}_{arm}.json",
    params:
        stage="onlinespec.tune",
        spec=paths_spec,
        settings=settings_of("onlinespec", *onlinespec_learning),
    log:
        "results/{scale}/onlinespec/logs/onlinespec_tune/seed{seed}_{arm}.log",
    benchmark:
        "results/{scale}/onlinespec/benchmarks/onlinespec_tune/seed{seed}_{arm}.tsv"
    wildcard_constraints:
        arm="|".join(onlinespec_tuned_arms),
    priority: LM_CONSUMER_PRIORITY  # reads the LM substrate: the critical path
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
        gpu=GPU["gpu"],  # tagged like onlinespec_train: it runs the same learners on torch_device()
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE


rule onlinespec_train:
    input:
        stream=rules.onlinespec_stream.output.stream,
        steps=lambda wildcards: onlinespec_tuned_steps(paper_settings(config, "onlinespec", wildcards.scale)),
        target="results/{scale}/lm/models/target",
        draft=rules.onlinespec_draft.output.model,
    output:
        table="results/{scale}/onlinespec/online/seed{seed}.parquet",
        costs="results/{scale}/onlinespec/online/seed{seed}_costs.json",
    params:
        stage="onlinespec.online",
        spec=paths_spec,
        settings=settings_of("onlinespec", *onlinespec_learning),
    log:
        "results/{scale}/onlinespec/logs/onlinespec_train/seed{seed}.log",
    benchmark:
        "results/{scale}/onlinespec/benchmarks/onlinespec_train/seed{seed}.tsv"
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


rule onlinespec_eval:
    input:
        unpack(lambda wildcards: onlinespec_tables(paper_settings(config, "onlinespec", wildcards.scale))),
        kernels="results/{scale}/onlinespec/kernels/kernels.json",  # rule onlinespec_kernels
    output:
        metrics="results/{scale}/onlinespec/metrics.json",
    params:
        stage="onlinespec.evaluate",
        spec=paths_spec,
        settings=settings_of("onlinespec", "seeds", "gamma"),
    log:
        "results/{scale}/onlinespec/logs/onlinespec_eval.log",
    benchmark:
        "results/{scale}/onlinespec/benchmarks/onlinespec_eval.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule onlinespec_figures:
    input:
        unpack(lambda wildcards: onlinespec_tables(paper_settings(config, "onlinespec", wildcards.scale))),
    output:
        acceptance=report("results/{scale}/onlinespec/figures/acceptance_per_chunk.png", caption="../../report/captions/onlinespec.rst", category="onlinespec"),
        speedup=report("results/{scale}/onlinespec/figures/speedup_per_arm.png", caption="../../report/captions/onlinespec.rst", category="onlinespec"),
        tuning=report("results/{scale}/onlinespec/figures/tuning_grid.png", caption="../../report/captions/onlinespec.rst", category="onlinespec"),
    params:
        stage="onlinespec.figures",
        spec=paths_spec,
        settings=settings_of("onlinespec"),
    log:
        "results/{scale}/onlinespec/logs/onlinespec_figures.log",
    benchmark:
        "results/{scale}/onlinespec/benchmarks/onlinespec_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["onlinespec"] = {
    "metrics": rules.onlinespec_eval.output.metrics,
    "figures": list(rules.onlinespec_figures.output),
}
