"""Stage ``onpolicy_sft.pretrain``: the base model every arm fine-tunes (or real weights from a local path).

The substrate's recipe (``icmlrepro.lm.train``) on this paper's pretraining corpus. At ``paper`` scale
``pretrained`` names a local directory with a Qwen3 checkpoint (``icmlrepro.lm.model.load``, never a
hub download); it is saved as the stage output with its own tokenizer.
"""

from __future__ import annotations

import logging

from icmlrepro.core.io import atomic_dir, read_parquet, write_json
from icmlrepro.core.seeding import derive_seed, seed_everything

log = logging.getLogger("icmlrepro.onpolicy_sft")


def run(job) -> None:
    from transformers import PreTrainedTokenizerFast

    from icmlrepro.lm.data import tasks_from_table
    from icmlrepro.lm.model import build_model, load, parameter_count
    from icmlrepro.lm.train import train

    p = job.params
    base = p["seeds"][0]
    if p.get("pretrained"):
        model, tok = load(p["pretrained"])
        curve = []
    else:
        seed_everything(derive_seed(base, "onpolicy_sft", "pretrain"))
        tok = PreTrainedTokenizerFast.from_pretrained(job.input.tokenizer, local_files_only=True)
        tok.padding_side = "left"
        model = build_model(len(tok), p["size"], tok, derive_seed(base, "onpolicy_sft", "init"))
        log.info("base model: %d parameters", parameter_count(model))
        t = p["pretraining"]
        curve = train(model, tok, tasks_from_table(read_parquet(job.input.pretrain)), t["steps"], t["batch_size"],
                      t["lr"], derive_seed(base, "onpolicy_sft", "batches"), logger=log)
    with atomic_dir(job.output.model) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    write_json(job.output.curve, {"parameters": parameter_count(model), "curve": curve})
