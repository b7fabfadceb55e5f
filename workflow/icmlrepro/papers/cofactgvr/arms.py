"""Arm names, what each one adds, and the labels the figures use: torch-free, so the figures job does not
import torch."""

from __future__ import annotations

ARMS = {  # arm: (counterfactual bonus: None / "predicted" / "shuffled" / "random", Q-PAS)
    "grpo": (None, False),
    "grpo_cf": ("predicted", False),
    "grpo_qpas": (None, True),
    "cofactgvr": ("predicted", True),
    "grpo_cfshuf": ("shuffled", False),
    "grpo_cfrand": ("random", False),
}
START = "start"  # the warm-started policy every arm begins from (evaluated as a reference)
LABELS = {START: "start (before RL)", "grpo": "GRPO", "grpo_cf": "+ CF bonus", "grpo_qpas": "+ Q-PAS",
          "cofactgvr": "CofactGVR (both)", "grpo_cfshuf": "CF bonus, shuffled in group (control)",
          "grpo_cfrand": "CF bonus, random region"}
