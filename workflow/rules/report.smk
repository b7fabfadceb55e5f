# The final rule: one self-contained HTML report per scale, comparing measured and claimed numbers.

rule report:
    input:
        # every configured paper's metrics and figures, and the claims files, claims schema and
        # templates it is rendered from (editing any of them reruns the report; common.smk)
        unpack(report_inputs),
    output:
        html=os.path.join(config["report_dir"], "report-{scale}.html"),
    params:
        spec=paths_spec,
        settings=report_settings,
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
        "python -m icmlrepro report --spec {params.spec:q} --settings {params.settings:q} > {log} 2>&1"


REPORT_HTML = expand(rules.report.output.html, scale=SCALE)


PAPER_TARGETS = paper_targets(SCALE)
