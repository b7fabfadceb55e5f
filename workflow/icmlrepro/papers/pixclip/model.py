"""The dual encoder: transformers' CLIP vision tower with an Alpha-CLIP patch embedding, and either CLIP's short
text tower or a long-context causal LM (Qwen3 architecture) with a trainable projection (PixCLIP's text side).

Alpha channel (as in Alpha-CLIP and PixCLIP's released code): a second, single-channel patch convolution whose
weights start at zero is added to the RGB patch embedding, so at initialisation the model is exactly the RGB
model and any mask shape can be a prompt. The image input is RGBA: the alpha plane is the region mask
(all ones for the whole image), normalised like Alpha-CLIP ((m - 0.5) / 0.26).

Every class is built from a small config (``CLIPVisionConfig``, ``CLIPTextConfig``, ``Qwen3Config``); at paper
scale the same classes load weights with ``from_pretrained`` from a local path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .data import EOS, PAD

ALPHA_MEAN, ALPHA_STD = 0.5, 0.26
RGB_MEAN, RGB_STD = 0.45, 0.27


class AlphaPatchEmbedding(nn.Module):
    """RGB patch conv + zero-initialised alpha patch conv; input (B, 4, H, W), output like the RGB conv."""

    def __init__(self, rgb: nn.Conv2d):
        super().__init__()
        self.rgb = rgb
        self.alpha = nn.Conv2d(1, rgb.out_channels, rgb.kernel_size, rgb.stride, bias=False)
        nn.init.zeros_(self.alpha.weight)

    @property
    def weight(self) -> torch.Tensor:  # CLIPVisionEmbeddings reads the patch conv's dtype from ``.weight``
        return self.rgb.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rgb(x[:, :3]) + self.alpha(x[:, 3:4])


class VisionTower(nn.Module):
    """CLIPVisionModel (+ alpha patch embedding when ``use_alpha``) and CLIP's visual projection.

    ``forward`` returns the pooled, projected embedding (CLS after the post-layernorm) and, if asked, every patch
    token through the same post-layernorm and projection (MaskCLIP-style dense features)."""

    def __init__(self, s: dict, use_alpha: bool):
        super().__init__()
        from transformers import CLIPVisionConfig, CLIPVisionModel

        cfg = CLIPVisionConfig(hidden_size=s["width"], intermediate_size=4 * s["width"], num_hidden_layers=s["vision_layers"],
                               num_attention_heads=s["heads"], image_size=s["image_size"], patch_size=s["patch_size"],
                               num_channels=3)
        self.clip = CLIPVisionModel(cfg)
        self.use_alpha = use_alpha
        if use_alpha:
            emb = self.tower.embeddings
            emb.patch_embedding = AlphaPatchEmbedding(emb.patch_embedding)
        self.proj = nn.Linear(s["width"], s["embed_dim"], bias=False)

    @property
    def tower(self) -> nn.Module:
        return getattr(self.clip, "vision_model", self.clip)  # transformers < 5 nests the transformer

    def forward(self, images: torch.Tensor, alpha: torch.Tensor | None, dense: bool = False):
        """``images`` (B, 3, H, W) in [0, 1]; ``alpha`` (B, H, W) in {0, 1} or None (whole image)."""
        x = (images - RGB_MEAN) / RGB_STD
        if self.use_alpha:
            a = torch.ones_like(x[:, :1]) if alpha is None else alpha[:, None].to(x.dtype)
            x = torch.cat([x, (a - ALPHA_MEAN) / ALPHA_STD], dim=1)
        out = self.clip(pixel_values=x)
        pooled = self.proj(out.pooler_output)
        if not dense:
            return pooled, None
        patches = self.tower.post_layernorm(out.last_hidden_state[:, 1:])
        return pooled, self.proj(patches)


class ShortTextTower(nn.Module):
    """CLIP's text transformer with a short context (EOS pooling) and CLIP's text projection."""

    def __init__(self, s: dict, vocab: int):
        super().__init__()
        from transformers import CLIPTextConfig, CLIPTextModel

        cfg = CLIPTextConfig(vocab_size=vocab, hidden_size=s["width"], intermediate_size=4 * s["width"],
                             num_hidden_layers=s["text_layers"], num_attention_heads=s["heads"],
                             max_position_embeddings=s["short_context"], pad_token_id=PAD, bos_token_id=2,
                             eos_token_id=EOS)
        self.context = s["short_context"]
        self.clip = CLIPTextModel(cfg)
        self.proj = nn.Linear(s["width"], s["embed_dim"], bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.clip(input_ids=ids, attention_mask=(ids != PAD).long())
        return self.proj(out.pooler_output)


class LongTextTower(nn.Module):
    """A small causal LM (Qwen3 architecture) over the long context, mean-pooled, with a trainable projection."""

    def __init__(self, s: dict, vocab: int):
        super().__init__()
        from transformers import Qwen3Config, Qwen3Model

        cfg = Qwen3Config(vocab_size=vocab, hidden_size=s["width"], intermediate_size=4 * s["width"],
                          num_hidden_layers=s["text_layers"], num_attention_heads=s["heads"],
                          num_key_value_heads=s["heads"], head_dim=s["width"] // s["heads"],
                          max_position_embeddings=s["long_context"], pad_token_id=PAD, eos_token_id=EOS,
                          tie_word_embeddings=False)
        self.context = s["long_context"]
        self.lm = Qwen3Model(cfg)
        self.proj = nn.Linear(s["width"], s["embed_dim"], bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        keep = ids != PAD
        h = self.lm(input_ids=ids, attention_mask=keep.long()).last_hidden_state
        w = keep.unsqueeze(-1).to(h.dtype)
        return self.proj((h * w).sum(1) / w.sum(1).clamp_min(1.0))


class DualEncoder(nn.Module):
    def __init__(self, s: dict, vocab: int, use_alpha: bool, long_text: bool):
        super().__init__()
        self.vision = VisionTower(s, use_alpha)
        self.text = (LongTextTower if long_text else ShortTextTower)(s, vocab)
        self.logit_scale = nn.Parameter(torch.tensor(2.659))  # log(1 / 0.07), CLIP's initial temperature

    @property
    def context(self) -> int:
        return self.text.context

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text(ids), dim=-1)


def preload() -> None:
    """Import the transformers classes up front (seconds of CPU), so that no seed's training time includes it."""
    from transformers import CLIPTextModel, CLIPVisionModel, Qwen3Model  # noqa: F401


def encode_ids(tok, texts, context: int) -> torch.Tensor:
    """Token ids padded to the longest text, each cut to ``context`` tokens with [EOS] kept last (CLIP's
    truncation: the tokens beyond the context are dropped, the end marker is not)."""
    rows = [e.ids[: context - 1] + [EOS] for e in tok.encode_batch(list(texts))]
    ids = torch.full((len(rows), max(len(r) for r in rows)), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.as_tensor(r)
    return ids
