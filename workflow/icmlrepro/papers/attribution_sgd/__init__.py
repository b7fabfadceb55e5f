"""Implicit attribution robustness from SGD dynamics (resources/claims/attribution_sgd.yaml).

Real small images (scikit-learn digits, scikit-image lfw_subset), MLP / CNN / small vision
transformers with softmax or kernel attention, trained by plain SGD over a noise-scale sweep;
Captum attributions; Ghorbani-style robustness (top-k intersection, rank correlation) under random
sign noise and a top-k attribution attack; parameter-space sharpness and input-space curvature.
"""
