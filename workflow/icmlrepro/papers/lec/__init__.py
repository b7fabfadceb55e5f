"""LEC: selection-conditioned risk control through a linear expectation constraint.

Stages (one per Snakemake rule): ``data`` (real labelled data from scikit-learn), ``train``
(base predictors of different quality give uncertainty scores and error labels), ``eval``
(random calibration/test splits, LEC vs baselines, routing), ``figures``.
"""
