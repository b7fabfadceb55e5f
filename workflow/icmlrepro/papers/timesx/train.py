"""Stage ``timesx.train``: pretrain the small forecasters of one seed on a synthetic corpus.

The corpus (series, pipeline context, announcements) is drawn from the seed, the text encoder is fitted
on its texts, then the foundation stand-in, the text-aware model, its no-text twin and the revision head
are trained. Every arm gets the same budget: the same epochs on the same windows for each learning rate
of the same grid, the rate picked by the L1 loss on validation windows of the pretraining generator
(ties, within one standard error over the validation windows of the best rate's loss, go to the default
rate). With ``tune_seeds`` 1 the first seed makes that choice for every seed: it trains the whole grid, the
other seeds train each arm at its chosen rate only (a third of the cost; the choice was made on 1,000
validation windows of the same generator, so one seed's pick is already a low-noise one). ``null``: every seed
tunes on its own. Nothing of either benchmark is seen (zero-shot, as in the paper).
"""

from __future__ import annotations

import numpy as np
import torch

from icmlrepro.core.io import read_pickle, write_pickle
from icmlrepro.core.seeding import derive_seed
from icmlrepro.core.tuning import pick_with_ties

from . import neural
from .synthetic import pretraining_corpus

ARMS = ("foundation", "textnet", "textnet_notext", "textrev")  # textrev revises the chosen foundation
def _loss(model, data) -> tuple[float, float]:
    """Masked L1 over the windows (every forecast step weighs the same) and its standard error over
    windows (ratio estimator: the noise of a rate choice made on it)."""
    with torch.no_grad():
        err = ((model(data) - data.y).abs() * data.mask).sum(1).double().numpy()
    steps = data.mask.sum(1).double().numpy()
    loss = err.sum() / steps.sum()
    se = float(np.std(err - loss * steps, ddof=1) / steps.mean() / np.sqrt(err.size)) if err.size > 1 else float("inf")
    return float(loss), se

def pick_lr(losses: list[float], grid: list[float], default: float, tolerance: float = 0.0):
    """``core.tuning.pick_with_ties``: the rate with the lowest validation loss, where rates within
    ``tolerance`` (one standard error of the best rate's loss) of it tie and a tie goes to the default
    (else the tied rate nearest it in log scale). Returns the Pick (``index``, ``moved_by_tie``)."""
    return pick_with_ties(grid, losses, default, higher_is_better=False, tolerance=tolerance)

def pretrain(settings: dict, seed: int, tuned: dict | None = None) -> dict:
    """Models (state dicts of the chosen rates), the text encoder, the training curves and the
    validation loss of every (arm, rate) trained. ``tuned`` (the tuning seed's ``lr_index`` and ``lr_tie``):
    train each arm at that rate only; the other rates' validation losses are NaN."""
    rng = np.random.default_rng(derive_seed(seed, "timesx", "corpus"))
    n_val = settings["val_windows"]
    corpus = pretraining_corpus(rng, settings["corpus_windows"] + n_val, settings["history"],
                                settings["p_announce"], settings)
    train, val = corpus[:-n_val], corpus[-n_val:]
    enc = neural.text_vectorizer([c["text"] for c in train], settings["text_features"], settings["text_slots"])

    def batch(part, blank=False, target="future"):
        return neural.Batch([c["history"] for c in part], [c["freq"] for c in part],
                            ["" if blank else c["text"] for c in part], enc, settings["history"],
                            [c[target] for c in part])

    data = {"foundation": (batch(train, target="future_series_only"), batch(val, target="future_series_only")),
            "textnet": (batch(train), batch(val)), "textnet_notext": (batch(train, True), batch(val, True)),
            "textrev": (batch(train), batch(val))}
    n_text = data["textnet"][0].t.shape[1]
    grid, chosen, curves, val_loss, state = list(settings["lr_grid"]), {}, {}, {}, {}
    lr_index, lr_tie, lr_se = {}, {}, {}
    for name in ARMS:
        fits = {}
        for j in (range(len(grid)) if tuned is None else [int(tuned["lr_index"][name])]):
            torch.manual_seed(derive_seed(seed, "timesx", "init", name))
            model = neural.build_model(name, settings["history"], n_text, settings["hidden"], chosen.get("foundation"))
            curve = neural.fit(model, data[name][0], settings["epochs"], settings["batch_size"], grid[j],
                               derive_seed(seed, "timesx", "batches", name))
            fits[j] = (model, curve, *_loss(model, data[name][1]))
        val_loss[name] = [fits[j][2] if j in fits else float("nan") for j in range(len(grid))]
        if tuned is None:
            best = min(fits, key=lambda j: val_loss[name][j])
            lr_se[name] = fits[best][3]
            pick = pick_lr(val_loss[name], grid, settings["lr"], lr_se[name])
            i, lr_tie[name] = pick.index, bool(pick.moved_by_tie)
        else:
            i, lr_tie[name] = int(tuned["lr_index"][name]), bool(tuned["lr_tie"][name])
            lr_se[name] = fits[i][3]
        lr_index[name] = i
        chosen[name], curves[name] = fits[i][0], fits[i][1]
        state[name] = fits[i][0].state_dict()
    # SeasonalNaive's L1 on the same validation windows and targets: what every arm starts from
    snaive = {k: float(((v[1].naive - v[1].y).abs() * v[1].mask).sum() / v[1].mask.sum()) for k, v in data.items()}
    return {"state": state, "vectorizer": enc, "n_text": n_text, "curves": curves, "val_loss": val_loss,
            "lr_grid": grid, "lr_index": lr_index, "lr_tie": lr_tie, "lr_se": lr_se, "val_loss_snaive": snaive}

def load_models(path, settings: dict) -> tuple[dict, object, dict]:
    """The trained models, the text encoder, and the rate choice (grid index and validation losses per arm)."""
    blob = read_pickle(path)
    models = neural.build_models(settings["history"], blob["n_text"], settings["hidden"])
    for k, m in models.items():
        m.load_state_dict(blob["state"][k])
        m.eval()
    return models, blob["vectorizer"], {k: blob[k] for k in ("lr_index", "lr_tie", "lr_se", "val_loss", "val_loss_snaive")}

def tuning_of(path) -> dict:
    """The rate choice stored in a tuning seed's models file (``lr_index``, ``lr_tie`` per arm)."""
    blob = read_pickle(path)
    return {k: blob[k] for k in ("lr_index", "lr_tie")}

def run(job) -> None:
    s = job.params
    tuned = tuning_of(job.input.tuned) if "tuned" in job.input else None
    blob = pretrain(s, int(job.wildcards.seed), tuned)
    write_pickle(job.output.models, blob)
