"""EMBGuard: an action-conditioned physical-safety guard judging (observation, action) pairs, on a compositional
hazard benchmark with the published 7 risk categories and 4 test splits (resources/claims/embguard.yaml)."""
