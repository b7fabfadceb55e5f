"""event2vec: events as Transformer tokens (resources/claims/event2vec.yaml, shared/papers/event2vec.md).

Chain: ``data`` (simulated event camera over rendered motion) -> ``train`` (one job per arm: learning-rate
tuning on the first seed, then every seed) -> ``evaluate`` (accuracy sweeps, parameters, throughput and
latency side by side) -> ``figures``.
"""
