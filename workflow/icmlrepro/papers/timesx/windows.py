"""Rolling forecast windows: consecutive, non-overlapping test windows at the end of each series.

A window is (origin, horizon): everything before index ``origin`` is history (what models and the
context pipeline may see); indices ``origin .. origin + horizon - 1`` are the forecast target.
"""

from __future__ import annotations

HORIZON = {"Y": 6, "Q": 8, "M": 12}  # forecast steps per frequency (one to two seasonal cycles)


def rolling_origins(n: int, horizon: int, n_windows: int, min_history: int) -> list[int]:
    """Origins of up to ``n_windows`` back-to-back test windows ending at the last observation.

    Windows whose history would be shorter than ``min_history`` are dropped (oldest first), so
    every model sees at least that much past.
    """
    if horizon < 1 or n_windows < 1:
        raise ValueError("horizon and n_windows must be positive")
    origins = [n - horizon * k for k in range(n_windows, 0, -1)]
    return [o for o in origins if o >= min_history]
