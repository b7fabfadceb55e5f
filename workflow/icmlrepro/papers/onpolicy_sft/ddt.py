"""Distribution Discriminant Theory's measure: the centered log-likelihood phi.

phi_t = log p(y_t | y_<t) + H(p_t): the log-probability of the token the data holds minus its
expectation under the model (E_{y~p}[log p(y)] = -H(p)). A token the model would itself produce at
its typical confidence has phi near 0; an out-of-distribution token has phi << 0. A sequence's phi
is the mean over its target tokens, a corpus's the mean over its sequences.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def token_phi(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """phi per position and the valid-position mask, from next-token ``logits`` [b, n, V] and ``labels``
    [b, n] (-100 = not a target), with the usual causal shift (logits at t predict labels at t+1)."""
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)
    lab = labels[:, 1:]
    mask = lab != -100
    tok = logp.gather(-1, lab.clamp(min=0)[..., None])[..., 0]
    entropy = -(logp.exp() * logp).sum(-1)
    return (tok + entropy) * mask, mask


@torch.no_grad()
def sequence_phi(model, batches) -> list[float]:
    """Mean phi over the target tokens of every sequence in ``batches`` of (ids, mask, labels)."""
    out = []
    for ids, mask, labels in batches:
        phi, valid = token_phi(model(input_ids=ids, attention_mask=mask).logits, labels)
        out += (phi.sum(-1) / valid.sum(-1).clamp(min=1)).tolist()
    return out
