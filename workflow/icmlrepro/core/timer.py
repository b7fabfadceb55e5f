"""Time measured where the work runs: CUDA events on a CUDA device, the host clock elsewhere.

On CUDA, kernels are queued and the host returns at once, so a host timer around a launch measures
the launch, not the work (a selection wait or a predictor cost read that way is ~0 whatever the GPU
does, and a claim on it cannot fail). An :class:`Interval` records a CUDA event on the current
stream at the start and at the end of its region and reads the elapsed device time only when
asked (after the work finished), so timing adds no synchronisation inside a decode loop. On the
CPU it is ``time.perf_counter``.
"""

from __future__ import annotations

import time
from collections import defaultdict


class Interval:
    """One timed region: ``with Interval(device) as t: ...`` then ``t.seconds()``."""

    def __init__(self, device="cpu"):
        self.cuda = str(device).startswith("cuda")
        self._start = self._end = None
        self._seconds = None

    def __enter__(self) -> "Interval":
        if self.cuda:
            import torch

            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if self.cuda:
            import torch

            self._end = torch.cuda.Event(enable_timing=True)
            self._end.record()
        else:
            self._seconds = time.perf_counter() - self._t0

    def seconds(self) -> float:
        """Elapsed seconds of the region (on CUDA: waits until its end event has happened)."""
        if self._seconds is None:
            self._end.synchronize()
            self._seconds = self._start.elapsed_time(self._end) / 1000.0
        return self._seconds


class Timings:
    """Named lists of intervals, read (and on CUDA synchronised) once at the end.

    Threads may add to it at the same time (the selection worker and the decode loop): appending to
    a list is atomic in CPython, and each interval records on the stream current in its own thread.
    """

    def __init__(self, device="cpu"):
        self.device = device
        self._intervals: dict[str, list[Interval]] = defaultdict(list)
        self._host: dict[str, list[float]] = defaultdict(list)

    def region(self, name: str) -> Interval:
        interval = Interval(self.device)
        self._intervals[name].append(interval)
        return interval

    def discard_last(self, name: str) -> None:
        """Forget the latest interval of ``name`` (a region that turned out not to be a measured step)."""
        self._intervals[name].pop()

    def add_host(self, name: str, seconds: float) -> None:
        """A host-side duration (e.g. the host blocked on a worker thread's future)."""
        self._host[name].append(seconds)

    def seconds(self, name: str) -> list[float]:
        return [i.seconds() for i in self._intervals.get(name, [])] + list(self._host.get(name, []))

    def total(self, name: str) -> float:
        return float(sum(self.seconds(name)))
