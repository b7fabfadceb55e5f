"""Stage ``lm.fit``: train the target or the draft model, or take real weights from a local path.

At ``paper`` scale ``pretrained.<role>`` may name a local directory with real Qwen3 weights (e.g.
Qwen3-8B); it is loaded with the same loader as pipeline checkpoints and saved as the stage output.
"""

from __future__ import annotations

import logging

from transformers import PreTrainedTokenizerFast

from icmlrepro.core.io import atomic_dir, read_parquet, write_json
from icmlrepro.core.seeding import derive_seed, seed_everything

from .data import tasks_from_table
from .model import build_model, load, parameter_count
from .train import train

log = logging.getLogger("icmlrepro.lm")


def run(job) -> None:
    p = job.params
    role = job.wildcards.role
    pretrained = (p.get("pretrained") or {}).get(role)
    if pretrained:
        model, tok = load(pretrained)
        curve = []
    else:
        seed_everything(derive_seed(p["seeds"][0], "lm", "fit", role))
        tok = PreTrainedTokenizerFast.from_pretrained(job.input.tokenizer, local_files_only=True)
        model = build_model(len(tok), p["sizes"][role], tok, derive_seed(p["seeds"][0], "lm", "init", role))
        log.info("%s: %d parameters", role, parameter_count(model))
        t = p["training"][role]
        curve = train(model, tok, tasks_from_table(read_parquet(job.input.train)), t["steps"], t["batch_size"],
                      t["lr"], derive_seed(p["seeds"][0], "lm", "batches", role), logger=log)
    with atomic_dir(job.output.model) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    write_json(job.output.curve, {"role": role, "parameters": parameter_count(model), "curve": curve})
