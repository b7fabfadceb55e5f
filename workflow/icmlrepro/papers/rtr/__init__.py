"""RTR: high-frequency (60 Hz) action chunking in a VAE latent space with Reuse-then-Refine, in miniature.

Stages (one per Snakemake rule): ``data`` (scripted-expert demonstrations of a MuJoCo push task at 60 Hz),
``vae`` (block VAE per seed, with the downsampling ablation), ``train`` (one diffusion policy x seed:
60 Hz actions, 15 Hz knots, or VAE latents), ``evaluate`` (held-out chunks and closed-loop rollouts under
sync / async execution with naive switching, temporal ensembling, RTC-like inpainting and RTR),
``figures``. The executor is in ``execute.py``, the smoothness measures in ``chunks.py``.
"""
