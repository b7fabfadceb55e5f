"""RPG-Encoder: a Repository Planning Graph encoded from real Python code, without an LLM.

Stages (one per Snakemake rule): ``data`` (real repositories on disk: the Python standard
library and installed pure-Python packages, vendored copies of other releases, the Python
changelog's issue entries, a runtime inventory of what the modules define), ``encode`` (the
graph: functional hierarchy + contains/imports/invokes/inherits, with LLM-free semantic
lifting), ``localize`` (issue localization by BM25 over code, the dependency graph and RPG
navigation, tuned with equal budgets), ``evolve`` (incremental updates over real release
differences and equal-sized simulated commits), ``evaluate`` (metrics.json), ``figures``.
"""
