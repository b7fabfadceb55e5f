# Towards On-Policy SFT: DDT, IDFT, Hinted Decoding (resources/claims/onpolicy_sft.yaml).
# onpolicy_sft_data -> onpolicy_sft_pretrain (base model on the shared LM substrate, or a local Qwen3
# checkpoint) -> onpolicy_sft_train (one job per seed: corpora by sampling and hinted decoding, then
# every arm over the same learning-rate grid) -> onpolicy_sft_eval -> onpolicy_sft_figures.
from icmlrepro.papers.onpolicy_sft.workflow_inputs import onpolicy_sft_seed_files


rule onpolicy_sft_data:
    output:
        pretrain="results/{scale}/onpolicy_sft/data/pretrain.parquet",
        target="results/{scale}/onpolicy_sft/data/target.parquet",
        ood="results/{scale}/onpolicy_sft/data/ood.parquet",
        tokenizer=directory("results/{scale}/onpolicy_sft/data/tokenizer"),
    params:
        stage="onpolicy_sft.data",
        spec=paths_spec,
        settings=settings_of("onpolicy_sft", "seeds", "target_family", "ood_families", "pretrain", "target", "ood"),
    log:
        "results/{scale}/onpolicy_sft/logs/onpolicy_sft_data.log",
    benchmark:
        "results/{scale}/onpolicy_sft/benchmarks/onpolicy_sft_data.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule onpolicy_sft_pretrain:
    input:
        pretrain=rules.onpolicy_sft_data.output.pretrain,
        tokenizer=rules.onpolicy_sft_data.output.tokenizer,
    output:
        model=directory("results/{scale}/onpolicy_sft/models/base"),
        curve="results/{scale}/onpolicy_sft/models/base_curve.json",
    params:
        stage="onpolicy_sft.pretrain",
        spec=paths_spec,
        settings=settings_of("onpolicy_sft", "seeds", "size", "pretraining", "pretrained"),
    log:
        "results/{scale}/onpolicy_sft/logs/onpolicy_sft_pretrain.log",
    benchmark:
        "results/{scale}/onpolicy_sft/benchmarks/onpolicy_sft_pretrain.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (3000 if wildcards.scale != "paper" else 64000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 24 * 60) * attempt,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE


rule onpolicy_sft_train:
    input:
        model=rules.onpolicy_sft_pretrain.output.model,
        target=rules.onpolicy_sft_data.output.target,
        ood=rules.onpolicy_sft_data.output.ood,
    output:
        predictions="results/{scale}/onpolicy_sft/train/seed{seed}/predictions.parquet",
        grid="results/{scale}/onpolicy_sft/train/seed{seed}/grid.parquet",
        corpus="results/{scale}/onpolicy_sft/train/seed{seed}/corpus.parquet",
        costs="results/{scale}/onpolicy_sft/train/seed{seed}/costs.json",
    params:
        stage="onpolicy_sft.train",
        spec=paths_spec,
        settings=settings_of("onpolicy_sft", "arms", "corpora", "finetune", "idft", "dpo", "simpo"),
    log:
        "results/{scale}/onpolicy_sft/logs/onpolicy_sft_train/seed{seed}.log",
    benchmark:
        "results/{scale}/onpolicy_sft/benchmarks/onpolicy_sft_train/seed{seed}.tsv"
    wildcard_constraints:
        seed=r"\d+",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (3000 if wildcards.scale != "paper" else 64000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 48 * 60) * attempt,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE


rule onpolicy_sft_eval:
    input:
        unpack(lambda wildcards: onpolicy_sft_seed_files(paper_settings(config, "onpolicy_sft", wildcards.scale))),
        ood=rules.onpolicy_sft_data.output.ood,
    output:
        metrics="results/{scale}/onpolicy_sft/metrics.json",
        table="results/{scale}/onpolicy_sft/eval/per_seed.parquet",
    params:
        stage="onpolicy_sft.evaluate",
        spec=paths_spec,
        settings=settings_of("onpolicy_sft", "seeds", "arms", "pretrain"),
    log:
        "results/{scale}/onpolicy_sft/logs/onpolicy_sft_eval.log",
    benchmark:
        "results/{scale}/onpolicy_sft/benchmarks/onpolicy_sft_eval.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


rule onpolicy_sft_figures:
    input:
        table=rules.onpolicy_sft_eval.output.table,
    output:
        accuracy=report("results/{scale}/onpolicy_sft/figures/ood_vs_in_domain.png", caption="../../report/captions/onpolicy_sft.rst", category="onpolicy_sft"),
        phi=report("results/{scale}/onpolicy_sft/figures/phi_per_corpus.png", caption="../../report/captions/onpolicy_sft.rst", category="onpolicy_sft"),
        cost=report("results/{scale}/onpolicy_sft/figures/cost_per_arm.png", caption="../../report/captions/onpolicy_sft.rst", category="onpolicy_sft"),
    params:
        stage="onpolicy_sft.figures",
        spec=paths_spec,
        settings=settings_of("onpolicy_sft", "arms"),
    log:
        "results/{scale}/onpolicy_sft/logs/onpolicy_sft_figures.log",
    benchmark:
        "results/{scale}/onpolicy_sft/benchmarks/onpolicy_sft_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["onpolicy_sft"] = {
    "metrics": rules.onpolicy_sft_eval.output.metrics,
    "figures": list(rules.onpolicy_sft_figures.output),
}
