"""Stage ``onlinespec.tune``: the learning rate of each single-rate arm, chosen on a separate tuning
stream with the same grid for every arm (see ``online.run_tune``)."""

from .online import run_tune as run  # noqa: F401
