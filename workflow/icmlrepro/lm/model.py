"""transformers' Qwen3 architecture, built from config for training here, or loaded from a local path.

The same loader serves the miniature (weights trained by the pipeline) and the paper scale (a local
directory with real Qwen3 weights, e.g. a copy of Qwen3-8B): ``from_pretrained`` with
``local_files_only=True``, so a missing directory is an error, never a hub download.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM


def build_config(vocab_size: int, size: dict, tokenizer: PreTrainedTokenizerFast) -> Qwen3Config:
    """A Qwen3 config from the size block of the settings (hidden, layers, heads, kv_heads, ...)."""
    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=size["hidden"],
        intermediate_size=size["intermediate"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        num_key_value_heads=size["kv_heads"],
        head_dim=size["hidden"] // size["heads"],
        max_position_embeddings=size["max_positions"],
        rope_theta=10000.0,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        attn_implementation="sdpa",
    )


def build_model(vocab_size: int, size: dict, tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(build_config(vocab_size, size, tokenizer))


def load(path: str | Path, device: str = "cpu", dtype: "torch.dtype | str" = "auto"):
    """Model (on ``device``, eval mode) and tokenizer from a local directory (pipeline checkpoint or
    real Qwen3 weights).

    ``dtype="auto"`` keeps the checkpoint's own dtype: bf16 for Qwen3-8B's published weights, fp32
    for the pipeline's miniature checkpoints. transformers builds the model on the meta device and
    fills it from the shards in that dtype, so an 8B model never exists as an fp32 host copy; it is
    then moved to ``device`` (a GPU-tagged stage passes ``core.device.torch_device()``).
    """
    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: no config.json; expected a local model directory "
                                "(a pipeline checkpoint or downloaded Qwen3 weights), never a hub id")
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    tokenizer.padding_side = "left"
    model.to(device).eval()
    return model, tokenizer


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
