"""Stage ``timesx.train``: pretrain the small forecasters of one seed on a synthetic corpus.

The corpus (series, pipeline context, announcements) is drawn from the seed, the text vocabulary
is fitted on its texts, then the foundation stand-in, the text-aware model and the revision head
are trained. Nothing of either benchmark is seen (zero-shot, as in the paper).
"""

from __future__ import annotations

import pickle

import numpy as np
import torch

from icmlrepro.core.io import atomic_path
from icmlrepro.core.seeding import derive_seed, seed_everything

from . import neural
from .synthetic import pretraining_corpus


def pretrain(settings: dict, seed: int) -> dict:
    """Models (state dicts), the text vectorizer and the training curves of one seed."""
    seed_everything(derive_seed(seed, "timesx", "init"))
    rng = np.random.default_rng(derive_seed(seed, "timesx", "corpus"))
    corpus = pretraining_corpus(rng, settings["corpus_windows"], settings["history"], settings["p_announce"],
                                settings)
    vec = neural.text_vectorizer([c["text"] for c in corpus], settings["text_features"])
    data = neural.Batch([c["history"] for c in corpus], [c["freq"] for c in corpus], [c["text"] for c in corpus],
                        vec, settings["history"], [c["future"] for c in corpus])
    n_text = data.t.shape[1]
    models = neural.build_models(settings["history"], n_text, settings["hidden"])
    targets = {"foundation": data.with_target([c["future_series_only"] for c in corpus]),
               "textnet": data, "textrev": data}
    curves = {}
    for name in ("foundation", "textnet", "textrev"):  # textrev revises the trained foundation
        curves[name] = neural.fit(models[name], targets[name], settings["epochs"], settings["batch_size"], settings["lr"],
                                  derive_seed(seed, "timesx", "batches", name))
    return {"state": {k: m.state_dict() for k, m in models.items()}, "vectorizer": vec, "n_text": n_text,
            "curves": curves}


def load_models(path, settings: dict) -> tuple[dict, object]:
    with open(path, "rb") as fh:
        blob = pickle.load(fh)
    models = neural.build_models(settings["history"], blob["n_text"], settings["hidden"])
    for k, m in models.items():
        m.load_state_dict(blob["state"][k])
        m.eval()
    return models, blob["vectorizer"]


def run(job) -> None:
    s = job.params
    torch.set_num_threads(max(1, int(job.threads)))
    blob = pretrain(s, int(job.wildcards.seed))
    with atomic_path(job.output.models) as tmp, open(tmp, "wb") as fh:
        pickle.dump(blob, fh)
