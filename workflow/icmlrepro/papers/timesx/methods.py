"""Names of the ranked methods: what the figures read, in a module that does not import torch."""

from __future__ import annotations

ENSEMBLE = "avgens"  # the simple average of the time-series model and the text-aware model
RANKED = ("snaive", "ets", "arima", "foundation", "textnet", "textrev", ENSEMBLE)
