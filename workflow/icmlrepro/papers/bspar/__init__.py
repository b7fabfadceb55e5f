"""B-Spar: reward-centric RL for perceptually aligned image retouching under sparse binary feedback.

Miniature (resources/claims/bspar.yaml): real scikit-image / scikit-learn photographs, hidden expert retouch
targets made with the same parametric tools the agent calls, a simulated perceptual judge giving one noisy
accept bit per edit sequence, a no-reference quality gain as the dense proxy, and policy-gradient agents.
"""
