#!/usr/bin/env bash
# The GPU check, for a machine with one CUDA GPU and the pipeline's environment (.venv with CUDA torch):
#
#     bash workflow/scripts/gpu_check.sh            # < 10 minutes on an A100/H100/H200
#
# Runs the GPU-tagged part of the DAG at a GPU scale (workflow/scripts/gpu_check.yaml: smoke-scale accuracy,
# prediction and LM evaluation on the GPU, a bf16 TPOT sweep at 8K-32K contexts) plus both kernel rules
# (Triton kernels vs torch references, do_bench timings, bandwidth share of the device's peak), one GPU job
# at a time, and writes the numbers under results/gpu_check/ (copied to $OUT when that is set): metrics.json
# of asyncspade and lm, both kernels.json, the TPOT table, the figures, the logs and summary.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
SM=${SNAKEMAKE:-.venv/bin/snakemake}
DEST=results/gpu_check
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 2)" || {
    echo "gpu_check: no CUDA device visible to $PY; nothing run" >&2; exit 2; }
mkdir -p "$DEST"
nvidia-smi > "$DEST/nvidia-smi.txt" 2>&1 || true
start=$(date +%s)
status=0
# --resources gpu=1: one GPU job at a time (timings of two jobs sharing the GPU would mean nothing)
# (targets first: --config and --configfile take every word after them)
timeout 500 "$SM" results/smoke/asyncspade/metrics.json results/smoke/asyncspade/figures/tpot_vs_context.png \
    results/smoke/onlinespec/kernels/kernels.json results/smoke/lm/metrics.json \
    --cores "$(nproc)" --resources gpu=1 --rerun-incomplete \
    --configfile workflow/scripts/gpu_check.yaml --config scale=smoke \
    > "$DEST/snakemake.log" 2>&1 || status=$?
echo "snakemake exit $status after $(( $(date +%s) - start )) s" | tee -a "$DEST/snakemake.log"
for f in asyncspade/metrics.json asyncspade/kernels/kernels.json asyncspade/tpot/tpot.parquet \
         asyncspade/figures onlinespec/kernels/kernels.json onlinespec/figures/kernels.png lm/metrics.json \
         asyncspade/logs onlinespec/logs lm/logs device/gpu_rule.json; do
    if [ -e "results/smoke/$f" ]; then mkdir -p "$DEST/$(dirname "$f")"; cp -r "results/smoke/$f" "$DEST/$f"; fi
done
"$PY" - "$DEST" <<'PY' || true
import json, math, sys
from pathlib import Path
dest = Path(sys.argv[1])
out = {}
m = dest / "asyncspade/metrics.json"
if m.exists():
    metrics = json.loads(m.read_text())["metrics"]
    keep = ("tpot_", "selection_wait", "predictor_time", "kernel_", "acc_", "predicted_query", "previous_query")
    out["asyncspade"] = {k: v["values"] for k, v in metrics.items() if k.startswith(keep)}
for paper in ("asyncspade", "onlinespec"):
    k = dest / paper / "kernels/kernels.json"
    if k.exists():
        r = json.loads(k.read_text())
        out[f"{paper}_kernels"] = {"device": r["device_name"], "checks_passed": all(c["passed"] for c in r["checks"]),
                                   "timings": r["timings"]}
(dest / "summary.json").write_text(json.dumps(out, indent=1, default=str))
print(json.dumps(out, indent=1, default=str)[:6000])
PY
if [ -n "${OUT:-}" ]; then cp -r "$DEST" "$OUT/"; fi
exit "$status"
