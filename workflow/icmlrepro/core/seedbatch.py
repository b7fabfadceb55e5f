"""K seeds of one small model trained as one batched model: the cost of a few seeds for many.

A paper whose per-seed model is small (an MLP, a small CNN or transformer, a GNN) spends most of a seed's
CPU time in per-call overhead: small matrix products that use a fraction of the cores, Python and autograd
bookkeeping per step. Stacking the K seeds' parameters along a leading dimension (``torch.func``'s
``stack_module_state``) and running the module once through ``vmap`` turns K small products into one batched
product and K optimiser steps into one.

What stays per seed, so that a seed trained in the batch is the same experiment as the seed trained alone:

- initialisation: each copy is built under its own ``torch.manual_seed`` (``init_seed(seed)``);
- data order and dropout: the caller draws each seed's batch indices from that seed's generator and passes
  a ``[K, B, ...]`` batch; randomness inside the module (dropout) is drawn per seed by ``vmap``'s
  ``randomness="different"``;
- the loss and its gradient: :meth:`SeedBatch.loss` sums the per-seed mean losses, so each seed's slice of
  the gradient is exactly that seed's own gradient (the slices share no parameter);
- the optimiser: Adam/AdamW/SGD act elementwise, so one optimiser over the stacked tensors takes exactly
  each seed's own step (same step count, moments per element). Anything global is per seed here:
  :func:`clip_grad_norm_per_seed` clips each seed's gradient by its own norm.

Outputs split back per seed (:meth:`SeedBatch.state_dicts`), so per-seed files and metrics are unchanged.
Differences from the seed-alone run are float rounding of batched kernels (checked in tests to tolerance).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from .seeding import derive_seed


def init_seed(seed: int, *keys: object) -> int:
    """The torch seed a copy's initialisation is drawn from (the same whether it is trained alone or batched)."""
    return derive_seed(seed, "init", *keys)


class SeedBatch(nn.Module):
    """``make()`` built once per seed (under ``init_seed(seed, *keys)``), stacked, and run with ``vmap``.

    ``forward(x)`` takes a ``[K, ...]`` input (one slice per seed, in the order of ``seeds``) and returns
    ``[K, ...]``. Parameters are ordinary ``nn.Parameter`` tensors with a leading seed dimension, so any
    elementwise ``torch.optim`` optimiser trains every seed at once.
    """

    def __init__(self, make: Callable[[], nn.Module], seeds: Sequence[int], *keys: object):
        super().__init__()
        self.seeds = [int(s) for s in seeds]
        models = []
        for seed in self.seeds:
            torch.manual_seed(init_seed(seed, *keys))
            models.append(make())
        params, buffers = stack_module_state(models)
        self._names = list(params)
        # a parameter frozen in the model as built (a pretrained backbone under an adapter) stays frozen
        trainable = {name: p.requires_grad for name, p in models[0].named_parameters()}
        self.stacked = nn.ParameterList([nn.Parameter(params[name].detach().clone(), requires_grad=trainable[name])
                                         for name in self._names])
        self._buffer_names = list(buffers)
        for i, name in enumerate(self._buffer_names):
            self.register_buffer(f"_buffer{i}", buffers[name].clone())
        self._base = copy.deepcopy(models[0]).to("meta")  # the architecture only: weights come from the stack

    @property
    def k(self) -> int:
        return len(self.seeds)

    def named_stacked(self) -> list[tuple[str, nn.Parameter]]:
        """(name in the single model, stacked ``[K, ...]`` parameter) pairs."""
        return list(zip(self._names, self.stacked))

    def _tensors(self) -> tuple[dict, dict]:
        params = dict(zip(self._names, self.stacked))
        buffers = {name: getattr(self, f"_buffer{i}") for i, name in enumerate(self._buffer_names)}
        return params, buffers

    def forward(self, x: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
        def one(params, buffers, *inputs):
            return functional_call(self._base, (params, buffers), inputs)

        params, buffers = self._tensors()
        return vmap(one, randomness="different")(params, buffers, x, *args)

    def loss(self, per_seed_losses: torch.Tensor) -> torch.Tensor:
        """The objective whose gradient is every seed's own gradient: the sum of the K per-seed losses."""
        if per_seed_losses.shape != (self.k,):
            raise ValueError(f"expected one loss per seed ({self.k}), got shape {tuple(per_seed_losses.shape)}")
        return per_seed_losses.sum()

    def state_dicts(self) -> dict[int, dict[str, torch.Tensor]]:
        """Each seed's weights as the state dict of a model trained alone."""
        params, buffers = self._tensors()
        return {seed: {name: t[i].detach().clone() for name, t in {**params, **buffers}.items()}
                for i, seed in enumerate(self.seeds)}

    def module_of(self, seed: int, make: Callable[[], nn.Module]) -> nn.Module:
        """One seed's model as a plain module (for evaluation code written for single models)."""
        model = make()
        model.load_state_dict(self.state_dicts()[seed])
        return model


def clip_grad_norm_per_seed(batch: SeedBatch, max_norm: float) -> torch.Tensor:
    """Gradient-norm clipping computed per seed (what each seed alone would do); returns the K norms."""
    grads = [p.grad for p in batch.stacked if p.grad is not None]
    if not grads:
        return torch.zeros(batch.k)
    norms = torch.sqrt(sum(g.reshape(batch.k, -1).pow(2).sum(1) for g in grads))
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))
    return norms


def per_seed_batches(n: int, batch: int, generators: Sequence, steps: int) -> torch.Tensor:
    """``[steps, K, batch]`` example indices, each seed's drawn from its own numpy generator (its data order)."""
    import numpy as np

    return torch.as_tensor(np.stack([[g.choice(n, size=batch, replace=False) for g in generators]
                                     for _ in range(steps)]))
