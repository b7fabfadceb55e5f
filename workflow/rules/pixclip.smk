# PixCLIP: alpha-channel region prompts + long text in CLIP, three-branch alignment (resources/claims/pixclip.yaml).
# pixclip_data -> pixclip_train (one job per arm, every seed inside; the ablations after pixclip, at its rate)
# -> pixclip_eval -> pixclip_figures
from icmlrepro.papers.pixclip.workflow_inputs import pixclip_lr_source, pixclip_model_files


rule pixclip_data:
    output:
        arrays="results/{scale}/pixclip/data/scenes.npz",
        scenes="results/{scale}/pixclip/data/scenes.parquet",
        regions="results/{scale}/pixclip/data/regions.parquet",
        tokenizer="results/{scale}/pixclip/data/tokenizer.json",
        summary="results/{scale}/pixclip/data/summary.json",
    params:
        stage="pixclip.data",
        spec=paths_spec,
        settings=settings_of("pixclip", "seeds", "image_size", "grid", "max_objects", "heldout_fraction", "n_train",
                             "n_val", "n_test", "short_context", "texture_side", "texture_stretch"),
    log:
        "results/{scale}/pixclip/logs/pixclip_data.log",
    benchmark:
        "results/{scale}/pixclip/benchmarks/pixclip_data.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (1500 if wildcards.scale != "paper" else 16000) * attempt,
        runtime=lambda wildcards, attempt: (10 if wildcards.scale != "paper" else 120) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule pixclip_train:
    input:
        # an ablation trains at PixCLIP's tuned rate (workflow_inputs.LR_FROM): named input "tuned"
        unpack(lambda wildcards: pixclip_lr_source(paper_settings(config, "pixclip", wildcards.scale), wildcards.arm)),
        arrays=rules.pixclip_data.output.arrays,
        scenes=rules.pixclip_data.output.scenes,
        regions=rules.pixclip_data.output.regions,
        tokenizer=rules.pixclip_data.output.tokenizer,
    output:
        models="results/{scale}/pixclip/train/{arm}/models.pt",
    params:
        stage="pixclip.train",
        spec=paths_spec,
        settings=settings_of("pixclip", "seeds", "image_size", "patch_size", "max_objects", "short_context",
                             "long_context", "width", "vision_layers", "text_layers", "heads", "embed_dim", "steps",
                             "batch", "lr", "lr_grid", "weight_decay", "region_name_share"),
    log:
        "results/{scale}/pixclip/logs/pixclip_train/{arm}.log",
    benchmark:
        "results/{scale}/pixclip/benchmarks/pixclip_train/{arm}.tsv"
    wildcard_constraints:
        arm="clip|alphaclip|pixclip|pixclip_no_global|pixclip_no_region|pixclip_no_pixel",
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (2000 if wildcards.scale != "paper" else 64000) * attempt,
        runtime=lambda wildcards, attempt: (30 if wildcards.scale != "paper" else 72 * 60) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule pixclip_eval:
    input:
        unpack(lambda wildcards: pixclip_model_files(paper_settings(config, "pixclip", wildcards.scale))),
        arrays=rules.pixclip_data.output.arrays,
        scenes=rules.pixclip_data.output.scenes,
        regions=rules.pixclip_data.output.regions,
        tokenizer=rules.pixclip_data.output.tokenizer,
    output:
        metrics="results/{scale}/pixclip/metrics.json",
        scores="results/{scale}/pixclip/eval/scores.parquet",
        predictions="results/{scale}/pixclip/eval/predictions.parquet",
    params:
        stage="pixclip.evaluate",
        spec=paths_spec,
        settings=settings_of("pixclip"),
    log:
        "results/{scale}/pixclip/logs/pixclip_eval.log",
    benchmark:
        "results/{scale}/pixclip/benchmarks/pixclip_eval.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: (3000 if wildcards.scale != "paper" else 64000) * attempt,
        runtime=lambda wildcards, attempt: (20 if wildcards.scale != "paper" else 600) * attempt,
    conda:
        ENV
    shell:
        STAGE


rule pixclip_figures:
    input:
        scores=rules.pixclip_eval.output.scores,
        predictions=rules.pixclip_eval.output.predictions,
        arrays=rules.pixclip_data.output.arrays,
        scenes=rules.pixclip_data.output.scenes,
        regions=rules.pixclip_data.output.regions,
    output:
        scores=report("results/{scale}/pixclip/figures/scores_per_arm.png", caption="../../report/captions/pixclip.rst", category="pixclip"),
        splits=report("results/{scale}/pixclip/figures/shapes_and_lengths.png", caption="../../report/captions/pixclip.rst", category="pixclip"),
        examples=report("results/{scale}/pixclip/figures/example_regions.png", caption="../../report/captions/pixclip.rst", category="pixclip"),
    params:
        stage="pixclip.figures",
        spec=paths_spec,
        settings=settings_of("pixclip", "arms"),
    log:
        "results/{scale}/pixclip/logs/pixclip_figures.log",
    benchmark:
        "results/{scale}/pixclip/benchmarks/pixclip_figures.tsv"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        ENV
    shell:
        STAGE


PAPER_OUTPUTS["pixclip"] = {
    "metrics": rules.pixclip_eval.output.metrics,
    "figures": list(rules.pixclip_figures.output),
}
