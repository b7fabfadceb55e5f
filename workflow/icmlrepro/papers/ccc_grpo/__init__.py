"""Distribution-aware GRPO with a Concordance Correlation Coefficient (CCC) reward for numeric regression by a
token-emitting vision-language model, in miniature.

Stages (one per Snakemake rule): ``data`` (per seed: rendered images whose numeric target follows a long-tailed
law, balanced validation and test sets, a long-tailed validation split, shot regions from the training counts),
``sft`` (one job per variant looping over seeds: token-level SFT and soft-label SFT on the long-tailed set and, as
the density control, token-level SFT on a balanced set), ``rl`` (GRPO from the SFT model, one job per reward
looping over seeds: point-wise, CCC, and CCC without the cross-sample terms as the control), ``evaluate`` (greedy
decoding of every arm, MAE / geometric-mean error by shot region, slope and CCC of predictions on targets),
``figures``. Every arm's learning rate comes from its stage's grid scored on the first seed's validation MAE, ties
to the stage's default (``tuning``, not a stage).
The GRPO loop is the shared, paper-agnostic ``icmlrepro.rl.grpo`` (also used by CofactGVR).
"""
