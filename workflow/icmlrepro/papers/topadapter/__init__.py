"""TopAdapter: topology-injecting parameter-efficient fine-tuning of a frozen pre-trained point Transformer.

Stages (one per Snakemake rule): ``data`` (point clouds sampled with trimesh from procedural mesh families:
a clean pretraining domain and a shifted, ScanObjectNN-like hard downstream domain with other classes,
partial views, clutter and noise; FPS + kNN patches), ``pretrain`` (the backbone, supervised, one per seed),
``train`` (one arm: every seed x learning-rate grid, the rate picked on validation), ``evaluate``, ``figures``.
"""
