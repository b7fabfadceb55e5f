"""PixCLIP: alpha-channel region prompts and long-form text in one CLIP model, three-branch alignment, in miniature.

Stages (one per Snakemake rule): ``data`` (the automated annotation pipeline analogue: multi-object scenes
textured with crops of real photographs, arbitrary-shape masks, region phrases and long captions, held-out
colour x texture combinations), ``train`` (one arm, every seed), ``evaluate`` (region classification,
region-text retrieval, referring expressions, pixel grounding, long and short global retrieval, with the
prompt-removed and truncated-text controls and the untrained model as floor), ``figures``.
"""
