"""Stage ``asyncspade.data``: per seed, the evaluation tasks decoded by every method, and gold
long chains of thought for the teacher-forced query-prediction analysis.

Both come from the substrate's task families (``icmlrepro.lm.tasks``); a seed draws fresh instances.
The gold traces are longer than what the miniature model was trained on: only its queries and keys
matter there (how predictable the next query is), not whether it could write the trace itself.
"""

from __future__ import annotations

from icmlrepro.core.io import write_parquet
from icmlrepro.lm.data import task_table


def run(job) -> None:
    p = job.params
    seed = int(job.wildcards.seed)
    write_parquet(job.output.eval, task_table(p["n_eval"], p["eval_steps_range"], seed, "asyncspade-eval",
                                              p["families"]))
    a = p["prediction"]
    write_parquet(job.output.traces, task_table(a["n_traces"], [a["trace_steps"]] * 2, seed, "asyncspade-traces",
                                                p["families"]))
