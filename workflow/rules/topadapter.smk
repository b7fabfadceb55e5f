# TopAdapter: topology-injecting PEFT on a frozen point Transformer (resources/claims/topadapter.yaml).
# topadapter_data -> topadapter_pretrain -> topadapter_train (one job per group of arms, all seeds) -> topadapter_eval
# -> topadapter_figures
from icmlrepro.papers.topadapter.workflow_inputs import topadapter_result_files


rule topadapter_data:
    output:
        pretrain="results/{scale}/topadapter/data/pretrain.pt",
        downstream="results/{scale}/topadapter/data/downstream.pt",
        summary="results/{scale}/topadapter/data/summary.json",
    params:
        stage="topadapter.data",
        spec=paths_spec,
        settings=settings_of("topadapter", "seeds", "data_seed", "n_points", "n_groups", "group_size", "pretrain_per_class",
                             "train_per_class", "val_per_class", "test_per_class", "keep_range", "clutter_range",
                             "jitter", "pretrain_jitter", "tilt_deg"),
    log:
        "results/{scale}/topadapter/logs/topadapter_data.log",
    benchmark:
        "results/{scale}/topadapter/benchmarks/topadapter_data.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (10 if wildcards.scale != "paper" else 120) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule topadapter_pretrain:
    input:
        pretrain=rules.topadapter_data.output.pretrain,
    output:
        backbones="results/{scale}/topadapter/pretrain/backbones.pt",
    params:
        stage="topadapter.pretrain",
        spec=paths_spec,
        settings=settings_of("topadapter", "seeds", "d", "depth", "heads", "mlp_ratio", "patch_hidden", "batch",
                             "pretrain_epochs", "pretrain_lr", "seed_batch"),
    log:
        "results/{scale}/topadapter/logs/topadapter_pretrain.log",
    benchmark:
        "results/{scale}/topadapter/benchmarks/topadapter_pretrain.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 32000) * attempt,
        runtime=lambda wildcards, attempt: (20 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule topadapter_train:
    input:
        downstream=rules.topadapter_data.output.downstream,
        backbones=rules.topadapter_pretrain.output.backbones,
    output:
        results="results/{scale}/topadapter/train/{group}/results.json",
    params:
        stage="topadapter.train",
        spec=paths_spec,
        settings=settings_of("topadapter", "seeds", "d", "depth", "heads", "mlp_ratio", "patch_hidden", "batch",
                             "epochs", "sweep_epochs", "lr_grid", "adapter_dim", "n_prompts", "k_patches", "topo_dim", "scales",
                             "lora_rank", "train_groups", "seed_batch", "lr_default", "match_params"),
    log:
        "results/{scale}/topadapter/logs/topadapter_train/{group}.log",
    benchmark:
        "results/{scale}/topadapter/benchmarks/topadapter_train/{group}.tsv"
    wildcard_constraints:
        group="[a-z0-9_]+",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 32000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 24 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule topadapter_eval:
    input:
        unpack(lambda wildcards: topadapter_result_files(paper_settings(config, "topadapter", wildcards.scale))),
        summary=rules.topadapter_data.output.summary,
    output:
        metrics="results/{scale}/topadapter/metrics.json",
        table="results/{scale}/topadapter/eval/runs.parquet",
    params:
        stage="topadapter.evaluate",
        spec=paths_spec,
        settings=settings_of("topadapter", "seeds", "arms", "lr_grid", "train_groups", "lr_default"),
    log:
        "results/{scale}/topadapter/logs/topadapter_eval.log",
    benchmark:
        "results/{scale}/topadapter/benchmarks/topadapter_eval.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        STAGE


rule topadapter_figures:
    input:
        table=rules.topadapter_eval.output.table,
        summary=rules.topadapter_data.output.summary,
    output:
        efficiency=report("results/{scale}/topadapter/figures/accuracy_vs_trainable_params.png", caption="../../report/captions/topadapter.rst", category="topadapter"),
        ablation=report("results/{scale}/topadapter/figures/ablations.png", caption="../../report/captions/topadapter.rst", category="topadapter"),
    params:
        stage="topadapter.figures",
        spec=paths_spec,
        settings=settings_of("topadapter", "arms"),
    log:
        "results/{scale}/topadapter/logs/topadapter_figures.log",
    benchmark:
        "results/{scale}/topadapter/benchmarks/topadapter_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["topadapter"] = {
    "metrics": rules.topadapter_eval.output.metrics,
    "figures": list(rules.topadapter_figures.output),
}
