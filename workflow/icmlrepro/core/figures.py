"""Figure conventions shared by every paper: headless backend, fixed size and dpi, atomic PNG writes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .io import atomic_path  # noqa: E402


def new_figure(ncols: int = 1, width: float = 4.2, height: float = 3.4):
    fig, axes = new_grid(1, ncols, width, height)
    return fig, axes[0]


def new_grid(nrows: int, ncols: int, width: float = 4.2, height: float = 3.4):
    """A figure with an nrows x ncols array of axes (always 2-D)."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             constrained_layout=True)
    return fig, axes


def save(fig, path) -> None:
    """Save a PNG without the timestamp metadata, so that the same data gives the same file."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
