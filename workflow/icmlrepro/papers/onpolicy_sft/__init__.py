"""Towards On-Policy SFT (DDT, IDFT, Hinted Decoding) on the shared small language model.

A base model (``icmlrepro.lm``'s Qwen3 architecture) is pretrained on the target and out-of-domain families written in its
own ("native") style, and on prompts that carry a worked solution as a hint. It is then fine-tuned on a
target set of longer ``sort`` problems whose ground-truth solutions are written in another style. Arms:
plain SFT, DFT, IDFT, SFT on the model's own correct samples, SFT on the hinted-decoding re-generation
(and on its beta = 0 control), IDFT on the hinted corpus (the framework), DPO and SimPO. In-domain
accuracy, out-of-domain accuracy on the other families (generalization and forgetting), the centered
log-likelihood phi of every training corpus, and wall-clock cost per arm are measured.
"""
