"""C2-GMAE: consistency- and coverage-aware graph masked auto-encoding, with its GraphMAE baseline.

The reproduction trains an ablation ladder (GraphMAE -> + positional-encoding reference ->
+ density-partitioned masking -> + heterophilic-edge amplification = C2-GMAE) on small real and
generated graphs, and measures linear-probe accuracy, consistency of neighbourhood-context use and
training coverage per density bin.
"""
