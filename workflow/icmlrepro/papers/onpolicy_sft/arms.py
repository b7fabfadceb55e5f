"""The arms and corpora by name (no torch import: the evaluation and figure stages read only these)."""

CORPORA = ("ground_truth", "ground_truth_matched", "self", "hinted", "hinted_beta0")

# arm -> (corpus or "pairs", loss); every arm takes the same steps, batch and learning-rate grid
ARMS = {
    "sft": ("ground_truth", "sft"),
    "dft": ("ground_truth", "dft"),
    "idft": ("ground_truth", "idft"),
    "self_sft": ("self", "sft"),
    "gt_matched_sft": ("ground_truth_matched", "sft"),
    "hint_sft": ("hinted", "sft"),
    "hint0_sft": ("hinted_beta0", "sft"),
    "hint_idft": ("hinted", "idft"),
    "dpo": ("pairs", "dpo"),
    "simpo": ("pairs", "simpo"),
}
