"""Distribution-aware GRPO with a Concordance Correlation Coefficient (CCC) reward for numeric regression by a
token-emitting vision-language model, in miniature.

Stages (one per Snakemake rule): ``data`` (rendered images whose numeric target follows a long-tailed law,
balanced validation and test sets, shot regions from the training counts), ``sft`` (token-level SFT, one job per
variant looping over seeds: the long-tailed set and, as the density control, a balanced set), ``rl`` (GRPO from
the SFT model, one job per reward looping over seeds: point-wise, CCC, CCC on shuffled pairings), ``evaluate``
(greedy decoding of every arm, MAE / geometric-mean error by shot region, slope and CCC of predictions on
targets), ``figures``. Every arm's learning rate comes from a 3-point grid scored on the first seed's validation
MAE (``tuning``, not a stage).
The GRPO loop is the shared, paper-agnostic ``icmlrepro.rl.grpo`` (also used by CofactGVR).
"""
