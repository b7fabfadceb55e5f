"""Distribution-aware GRPO with a Concordance Correlation Coefficient (CCC) reward for numeric regression by a
token-emitting vision-language model, in miniature.

Stages (one per Snakemake rule): ``data`` (rendered images whose numeric target follows a long-tailed law,
balanced test set, shot regions from the training counts), ``sft`` (token-level SFT per seed, on the
long-tailed set and, as the density control, on a balanced set), ``rl`` (GRPO from the SFT model, one job per
reward x seed: point-wise, CCC, CCC on shuffled pairings), ``evaluate`` (greedy decoding of every arm,
MAE / geometric-mean error by shot region, slope and CCC of predictions on targets), ``figures``.
The GRPO loop is the shared, paper-agnostic ``icmlrepro.rl.grpo`` (also used by CofactGVR).
"""
