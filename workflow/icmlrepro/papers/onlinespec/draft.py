"""Stage ``onlinespec.draft``: OnlineSPEC's own offline draft, mismatched to the stream by construction.

The substrate's draft (``lm_train``) was distilled on every task family the stream draws from, so at
default scale online updates had nothing to recover (issue 38: updates gained inside a phase and lost
more after each shift). This draft has the substrate draft's architecture (its ``config.json``, fresh
weights) and the substrate's training recipe (``lm.train.train``), but is trained only on the families
of ``offline_draft.families`` of the substrate's training set: the stream's other families are new to
it, which is the drift online learning is for. The shared substrate is left untouched.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

from icmlrepro.core.io import atomic_dir, read_parquet, write_json
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.lm.data import tasks_from_table
from icmlrepro.lm.model import parameter_count
from icmlrepro.lm.train import train

log = logging.getLogger("icmlrepro.onlinespec")


def fresh_like(model_dir: str | Path, seed: int):
    """A freshly initialised model with the architecture of the checkpoint in ``model_dir``."""
    torch.manual_seed(seed)
    cfg = AutoConfig.from_pretrained(model_dir, local_files_only=True)
    return AutoModelForCausalLM.from_config(cfg)


def run(job) -> None:
    p = job.params
    o = p["offline_draft"]
    seed = derive_seed(p["seeds"][0], "onlinespec", "offline_draft")
    seed_everything(seed)
    tok = PreTrainedTokenizerFast.from_pretrained(job.input.tokenizer, local_files_only=True)
    data = read_parquet(job.input.train)
    data = data[data.family.isin(o["families"])]
    if data.empty:
        raise ValueError(f"offline_draft.families {o['families']} match no training task")
    model = fresh_like(job.input.substrate_draft, derive_seed(seed, "init"))
    log.info("offline draft: %d parameters, %d tasks of %s", parameter_count(model), len(data), o["families"])
    curve = train(model, tok, tasks_from_table(data), o["steps"], o["batch_size"], o["lr"],
                  derive_seed(seed, "batches"), logger=log)
    with atomic_dir(job.output.model) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    write_json(job.output.curve, {"families": list(o["families"]), "parameters": parameter_count(model),
                                  "curve": curve})
