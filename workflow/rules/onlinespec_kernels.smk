# OnlineSPEC's verification kernel (workflow/icmlrepro/papers/onlinespec/kernel_bench.py): checked against its
# torch reference on every device (Triton's interpreter without a GPU), timed with its bandwidth share on
# CUDA. GPU-tagged; its figure joins OnlineSPEC's section of the report.


rule onlinespec_kernels:
    output:
        kernels="results/{scale}/onlinespec/kernels/kernels.json",
        figure=report("results/{scale}/onlinespec/figures/kernels.png", caption="../../report/captions/onlinespec.rst", category="onlinespec"),
    params:
        stage="onlinespec.kernel_bench",
        spec=paths_spec,
        settings=settings_of("onlinespec", "seeds"),
    log:
        "results/{scale}/onlinespec/logs/onlinespec_kernels.log",
    benchmark:
        "results/{scale}/onlinespec/benchmarks/onlinespec_kernels.tsv"
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


PAPER_OUTPUTS["onlinespec"]["figures"].append(rules.onlinespec_kernels.output.figure)
