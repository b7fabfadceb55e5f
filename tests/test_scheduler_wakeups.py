"""The scheduler keeps one pending wake-up timer (icmlrepro.core.scheduler_wakeups)."""

from __future__ import annotations

import threading
import time

from snakemake.scheduling.job_scheduler import JobScheduler

from icmlrepro.core.scheduler_wakeups import one_pending_wakeup


class _Scheduler:
    """The two members of Snakemake's JobScheduler the wake-up uses, with its original method."""

    _schedule_reevalutation = JobScheduler._schedule_reevalutation

    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def _wakeups(cls, rounds: int, delay: float = 0.05) -> int:
    """Schedule a re-evaluation ``rounds`` times in a row (as that many scheduling rounds would), wait for
    the timers, and count the scheduler's wake-ups."""
    s = cls()
    for _ in range(rounds):
        cls._schedule_reevalutation(s, delay)
    time.sleep(delay + 0.5)
    n = 0
    while s._open_jobs.acquire(blocking=False):
        n += 1
    return n


def test_snakemakes_own_method_wakes_the_scheduler_once_per_round():
    """The upstream behaviour this module works around: N rounds, N wake-ups (N chains of rounds)."""
    class Upstream(_Scheduler):
        pass

    assert _wakeups(Upstream, 20) == 20


def test_patched_scheduler_keeps_one_pending_wakeup_and_wakes_again_after_it_fired():
    class Patched(_Scheduler):
        pass

    assert one_pending_wakeup(Patched) and one_pending_wakeup(Patched)  # idempotent
    assert _wakeups(Patched, 20) == 1
    s = Patched()
    Patched._schedule_reevalutation(s, 0.01)
    time.sleep(0.3)
    Patched._schedule_reevalutation(s, 0.01)  # the first fired: a new one starts
    time.sleep(0.3)
    assert s._open_jobs.acquire(blocking=False) and s._open_jobs.acquire(blocking=False)
    assert s._icmlrepro_wakeup.daemon


def test_a_snakemake_without_the_method_is_left_alone():
    class Reworked:
        pass

    assert not one_pending_wakeup(Reworked) and not hasattr(Reworked, "_schedule_reevalutation")


def test_the_workflow_installs_it_on_snakemakes_scheduler():
    from pathlib import Path

    common = (Path(__file__).parents[1] / "workflow" / "rules" / "common.smk").read_text()
    assert "one_pending_wakeup()" in common
