"""One place for randomness and threads, so that the same config and seed give the same bytes."""

from __future__ import annotations

import hashlib
import os
import random
import sys

import numpy as np


def derive_seed(base: int, *keys: object) -> int:
    """A stable 32-bit seed for a named stream (e.g. ``derive_seed(seed, "split", 3)``).

    Hash-based rather than ``base + i`` so that streams for different purposes never collide.
    """
    h = hashlib.sha256(repr((int(base),) + tuple(str(k) for k in keys)).encode()).digest()
    return int.from_bytes(h[:4], "little")


def set_threads(threads: int) -> None:
    """Limit every math library to the cores Snakemake gave this job."""
    threads = max(1, int(threads))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    # BLAS/OpenMP pools already loaded (numpy's and scipy's OpenBLAS read the variables only at load)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    # torch only if a stage already imported it: importing it here cost every job 1-4 s of start-up,
    # and a torch imported later reads OMP_NUM_THREADS (set above) for its pool.
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def seed_everything(seed: int, deterministic: bool = True) -> np.random.Generator:
    """Seed python, numpy and torch; make torch pick deterministic kernels. Returns a numpy Generator."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        import torch

        torch.manual_seed(seed)
        if deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
    except ImportError:  # pragma: no cover
        pass
    return np.random.default_rng(seed)
