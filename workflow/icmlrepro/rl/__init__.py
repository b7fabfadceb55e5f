"""Reinforcement-learning pieces shared by papers: ``grpo`` (GRPO's group advantages, clipped objective and
KL to a reference, with the optional Q-PAS filter and priority sampling of CofactGVR)."""
