"""Reproductions of 19 ICML 2026 papers, driven by one Snakemake workflow.

The package holds all logic; the Snakemake rules under ``workflow/rules`` only call
``icmlrepro stage <paper>.<stage>`` (see :mod:`icmlrepro.core.cli`).
"""

__version__ = "0.1.0"
