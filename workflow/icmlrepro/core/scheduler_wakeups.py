"""One pending wake-up timer in Snakemake's job scheduler, not one more for every finished job.

Snakemake 9 ends every scheduling round that leaves ready jobs waiting for a core by starting a
``threading.Timer`` that wakes the scheduler again after the job rate limiter's timespan (1 s: the
default ``--max-jobs-per-timespan 100/1s``). A finished job wakes the scheduler too, and that round
starts one more timer; every timer's round starts the next. So each finished job adds a wake-up chain
that lives as long as jobs wait, and after N finished jobs the scheduler re-evaluates the whole set of
ready jobs (file existence and sizes, job selection) about N times a second. On the 2-core default DAG
(294 jobs, most of them waiting for a core) Snakemake's own process grew from a few percent of one core
to half of one, ~750 CPU-s over the first 80 minutes (py-spy: the main thread mostly starting timer
threads); upstream issue snakemake/snakemake#3804 reports the same growth as a crash on large DAGs.

One pending timer is all the rate limiter needs: a round blocked by the limit is re-run when the timer
fires, and every finished job still wakes the scheduler at once. Jobs, their order and the rate limit
are unchanged; only the redundant rounds go. The timer is a daemon so that it never delays exit.
"""

from __future__ import annotations

import threading

_MARK = "_icmlrepro_one_pending_wakeup"


def _schedule_reevaluation(self, delay: float) -> None:
    pending = getattr(self, "_icmlrepro_wakeup", None)
    if pending is not None and pending.is_alive():
        return
    timer = threading.Timer(delay, self._open_jobs.release)
    timer.daemon = True
    self._icmlrepro_wakeup = timer
    timer.start()


def one_pending_wakeup(scheduler_cls=None) -> bool:
    """Install the single-timer wake-up on Snakemake's ``JobScheduler`` (idempotent). Returns False,
    changing nothing, where the Snakemake in use has no such method (a version that reworked it)."""
    if scheduler_cls is None:
        from snakemake.scheduling.job_scheduler import JobScheduler as scheduler_cls
    if getattr(scheduler_cls, _MARK, False):
        return True
    if not callable(getattr(scheduler_cls, "_schedule_reevalutation", None)):  # sic: Snakemake's spelling
        return False
    scheduler_cls._schedule_reevalutation = _schedule_reevaluation
    setattr(scheduler_cls, _MARK, True)
    return True
