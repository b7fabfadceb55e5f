"""CofactGVR: counterfactual evidence rewards and Q-PAS for grounded visual reasoning, in miniature.

Stages (one per Snakemake rule): ``data`` (a grounded-VQA world with a planted colour/shape shortcut and a
cue-broken test split), ``train`` (one arm, all seeds: GRPO with or without the counterfactual bonus and
Q-PAS), ``evaluate`` (accuracy, evidence IoU, faithfulness under masking, shortcut rate; metrics.json),
``figures``. The GRPO loop with Q-PAS is the shared ``icmlrepro.rl.grpo``.
"""
