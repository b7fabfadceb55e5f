# Reproduction pipeline for 19 ICML 2026 papers: one rule chain per paper, one HTML report.
# Main command (README): snakemake --cores all   -> report/report-<scale>.html
# The logic lives in the `icmlrepro` package (workflow/icmlrepro); rules only call it.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/device.smk"
include: "workflow/rules/lm.smk"
include: "workflow/rules/lec.smk"
include: "workflow/rules/collapsed_ops.smk"
include: "workflow/rules/asyncspade.smk"
include: "workflow/rules/onlinespec.smk"
include: "workflow/rules/onlinespec_kernels.smk"
include: "workflow/rules/rpg_encoder.smk"
include: "workflow/rules/c2gmae.smk"
include: "workflow/rules/timesx.smk"
include: "workflow/rules/graph_alignment.smk"
include: "workflow/rules/attribution_sgd.smk"
include: "workflow/rules/mlembed.smk"
include: "workflow/rules/topadapter.smk"
include: "workflow/rules/event2vec.smk"
include: "workflow/rules/pixclip.smk"
include: "workflow/rules/ccc_grpo.smk"
include: "workflow/rules/cofactgvr.smk"
include: "workflow/rules/embguard.smk"
include: "workflow/rules/onpolicy_sft.smk"
include: "workflow/rules/bspar.smk"
include: "workflow/rules/rtr.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        REPORT_HTML,
        # every configured paper's metrics and figures: a failed rerun (whose outputs Snakemake deletes) is
        # redone by the next plain command, and the report with it (report.smk)
        PAPER_TARGETS,
