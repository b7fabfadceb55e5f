"""Base predictors of different quality, trained in the pipeline on the digits table.

Each seed draws one train/pool split (shared by all models of that seed, so that routing sees
the same inputs), trains the model on the train part, and records on the pool its prediction,
uncertainty score u = 1 - max class probability, and error indicator.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything

MODELS = ("gnb", "logreg", "mlp")


def train_pool_split(n: int, seed: int, train_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(derive_seed(seed, "lec", "train_pool"))
    perm = rng.permutation(n)
    k = int(round(train_fraction * n))
    return np.sort(perm[:k]), np.sort(perm[k:])


def _mlp_proba(x_tr, y_tr, x_te, seed: int, epochs: int) -> np.ndarray:
    import torch  # here, not at the top: two of the three models' jobs (two thirds of LEC's 75) never need its ~0.8 s import

    torch.manual_seed(derive_seed(seed, "lec", "mlp"))
    net = torch.nn.Sequential(torch.nn.Linear(x_tr.shape[1], 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=1e-4)
    xt, yt = torch.as_tensor(x_tr), torch.as_tensor(y_tr)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(xt), yt)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return torch.softmax(net(torch.as_tensor(x_te)), dim=1).double().numpy()


def predict_proba(model: str, x_tr, y_tr, x_te, seed: int, mlp_epochs: int | None,
                  gnb_var_smoothing: float | None = None) -> np.ndarray:
    if model == "gnb":
        # sklearn's default floor (1e-9) leaves near-constant pixels with near-zero variance: the posteriors are
        # 0/1 and 90% of the scores tie at u = 0, so no threshold can separate its errors (ranking AUC 0.55)
        return GaussianNB(var_smoothing=gnb_var_smoothing).fit(x_tr, y_tr).predict_proba(x_te)
    if model == "logreg":
        return LogisticRegression(C=0.05, max_iter=2000).fit(x_tr, y_tr).predict_proba(x_te)
    if model == "mlp":
        return _mlp_proba(x_tr, y_tr, x_te, seed, mlp_epochs)
    raise ValueError(f"unknown model {model!r} (known: {', '.join(MODELS)})")


def predictions(table: pd.DataFrame, model: str, seed: int, train_fraction: float,
                mlp_epochs: int | None, gnb_var_smoothing: float | None = None) -> pd.DataFrame:
    seed_everything(derive_seed(seed, "lec", model))
    x = table.filter(like="px").to_numpy(np.float32)
    y = table["label"].to_numpy()
    tr, pool = train_pool_split(len(table), seed, train_fraction)
    proba = predict_proba(model, x[tr], y[tr], x[pool], seed, mlp_epochs, gnb_var_smoothing)
    pred = proba.argmax(axis=1)
    return pd.DataFrame({
        "idx": table["idx"].to_numpy()[pool],
        "label": y[pool],
        "pred": pred,
        "uncertainty": np.round(1.0 - proba.max(axis=1), 12),
        "error": (pred != y[pool]).astype(np.int8),
    })


def run(job) -> None:
    p = job.params
    df = predictions(read_parquet(job.input.table), job.wildcards.model, int(job.wildcards.seed),
                     p.train_fraction, p.get("mlp_epochs"), p.get("gnb_var_smoothing"))  # each model's own
    write_parquet(job.output.predictions, df)
