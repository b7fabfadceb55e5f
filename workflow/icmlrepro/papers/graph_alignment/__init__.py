"""Graph alignment as a GNN benchmark and pre-training task (resources/claims/graph_alignment.yaml)."""
