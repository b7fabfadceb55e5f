# The final rule: one self-contained HTML report per scale, comparing measured and claimed numbers.


def report_inputs(wildcards):
    """Metrics and figures of every configured paper that has rules; the rest show as not run."""
    inputs = {}
    for paper in PAPERS:
        outs = PAPER_OUTPUTS.get(paper)
        if outs is None:
            continue
        inputs[f"{paper}__metrics"] = expand(outs["metrics"], scale=wildcards.scale)[0]
        for i, fig in enumerate(outs["figures"]):
            inputs[f"{paper}__figure{i}"] = expand(fig, scale=wildcards.scale)[0]
    return inputs


def report_spec(wildcards, input, output, threads):
    return json.dumps(
        {
            "input": dict(input.items()),
            "output": dict(output.items()),
            "wildcards": dict(wildcards.items()),
            "threads": threads,
            "params": {
                "scale": wildcards.scale,
                "papers": PAPERS,
                "config": config,
                "template": str(Path(workflow.basedir) / "report" / "templates" / "report.html.j2"),
                "results_dir": str(Path("results") / wildcards.scale),
            },
        },
        sort_keys=True,
    )


rule report:
    input:
        unpack(report_inputs),
    output:
        html=config["report_dir"] + "/report-{scale}.html",
    params:
        spec=report_spec,
    log:
        "results/{scale}/logs/report.log",
    benchmark:
        "results/{scale}/benchmarks/report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        "python -m icmlrepro report --spec {params.spec:q} > {log} 2>&1"


REPORT_HTML = expand(rules.report.output.html, scale=SCALE)
