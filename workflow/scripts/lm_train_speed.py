"""Steps/s, CPU per step and a hash of the weights of the LM substrate's training loop (lm.train.train).

    .venv/bin/python workflow/scripts/lm_train_speed.py DATA_DIR ROLE STEPS THREADS [VARIANT] [SCALE]

DATA_DIR holds lm_data's outputs (train.parquet, tokenizer/), e.g. results/default/lm/data; ROLE is
target or draft; the sizes, batch size, learning rate and seeds are the config's at SCALE (default).
VARIANT: base (the pipeline's loop), foreach / fused (AdamW options), both (foreach AdamW and
gradient clipping), compile (torch.compile of the forward), eager (eager attention instead of sdpa),
nomask (no attention mask: right padding under a causal mask is never attended by a real token, so the
loss is the same in exact arithmetic), profile (torch.profiler table).
Set OMP_WAIT_POLICY in the environment to compare OpenMP wait policies (jobs run with PASSIVE).
A speed-up is admissible only if the weights hash is unchanged (same bytes, same metrics).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    data, role, steps, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    variant = sys.argv[5] if len(sys.argv) > 5 else "base"
    scale = sys.argv[6] if len(sys.argv) > 6 else "default"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch
    import yaml
    from transformers import PreTrainedTokenizerFast

    import icmlrepro.lm.train as T
    from icmlrepro.core.io import read_parquet
    from icmlrepro.core.seeding import derive_seed, seed_everything
    from icmlrepro.lm.data import tasks_from_table
    from icmlrepro.lm.model import build_model

    torch.set_num_threads(threads)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["lm"][scale]
    seed0 = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["seeds"]["base"]
    seed_everything(derive_seed(seed0, "lm", "fit", role))  # as lm.fit does
    tok = PreTrainedTokenizerFast.from_pretrained(f"{data}/tokenizer", local_files_only=True)
    model = build_model(len(tok), cfg["sizes"][role], tok, derive_seed(seed0, "lm", "init", role))
    t = cfg["training"][role]
    tasks = tasks_from_table(read_parquet(f"{data}/train.parquet"))
    if variant in ("foreach", "fused", "both"):
        T.torch.optim.AdamW = functools.partial(torch.optim.AdamW, **{"fused" if variant == "fused" else "foreach": True})
    if variant == "both":
        clip = torch.nn.utils.clip_grad_norm_
        T.torch.nn.utils.clip_grad_norm_ = lambda params, max_norm: clip(params, max_norm, foreach=True)
    if variant == "eager":
        model.set_attn_implementation("eager")
    if variant == "nomask":
        collate = T.collate
        T.collate = lambda batch, pad_id: (lambda ids, mask, labels: (ids, None, labels))(*collate(batch, pad_id))
    if variant == "compile":
        model.forward = torch.compile(model.forward, dynamic=True)
    args = (model, tok, tasks, steps, t["batch_size"], t["lr"], derive_seed(seed0, "lm", "batches", role))
    if variant == "profile":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            T.train(*args)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
        return
    w0, c0 = time.perf_counter(), time.process_time()
    curve = T.train(*args, log_every=max(1, steps))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    h = hashlib.sha256()
    for key, value in sorted(model.state_dict().items()):
        h.update(key.encode())
        h.update(value.detach().contiguous().numpy().tobytes())
    print(f"{variant} role={role} threads={threads} steps={steps} OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '-')}: "
          f"{steps / wall:.2f} steps/s wall, {cpu / steps * 1000:.0f} ms CPU/step, loss {curve[-1]['loss']:.6f}, "
          f"weights {h.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
