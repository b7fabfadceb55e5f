# The device probe: a GPU-tagged rule that records what a GPU job actually gets (model, scheduler
# variables), shown in the report's provenance. Like every GPU rule it requests config["gpu"].


rule device_probe:
    output:
        device="results/{scale}/device/gpu_rule.json",
    params:
        stage="core.device",
        spec=paths_spec,
        settings=lambda wildcards: json.dumps({"gpu": config["gpu"]}),
    log:
        "results/{scale}/logs/device_probe.log",
    benchmark:
        "results/{scale}/benchmarks/device_probe.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
        gpu=GPU["gpu"],
        gpu_model=GPU["gpu_model"],
    conda:
        ENV
    shell:
        STAGE
