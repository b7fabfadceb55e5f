"""The "MLLM" analogue: a small CNN image encoder whose features become ``prefix`` embedding vectors in front of
a transformers Qwen3 decoder (built from config), which writes the target as two digit tokens and <eos>.

Vocabulary (fixed, no tokenizer to train): <pad> 0, <bos> 1, <eos> 2, digits '0'..'9' = 3..12. An answer is
well-formed when the three generated tokens are digit, digit, <eos> (the format check); its value is the
two-digit number. Every arm uses this model unchanged (the paper's plug-and-play: only the training signal
differs). At paper scale the decoder would be a real MLLM; the loader here builds the miniature from config.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

PAD, BOS, EOS, DIGIT0 = 0, 1, 2, 3
VOCAB = 13
ANSWER_TOKENS = 3  # two digits and <eos>


def encode_targets(y: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(n, 4) token rows [<bos>, tens, units, <eos>] of integer targets in 0..99."""
    y = torch.as_tensor(y, dtype=torch.long)
    return torch.stack([torch.full_like(y, BOS), DIGIT0 + y // 10, DIGIT0 + y % 10, torch.full_like(y, EOS)], 1)


def parse_answers(tokens: torch.Tensor) -> np.ndarray:
    """Values of (n, 3) generated token rows; NaN where the row is not digit, digit, <eos>."""
    t = tokens.cpu().numpy()
    is_digit = (t >= DIGIT0) & (t < DIGIT0 + 10)
    ok = is_digit[:, 0] & is_digit[:, 1] & (t[:, 2] == EOS)
    val = 10.0 * (t[:, 0] - DIGIT0) + (t[:, 1] - DIGIT0)
    return np.where(ok, val, np.nan)


def answer_mask(tokens: torch.Tensor) -> torch.Tensor:
    """(n, 3) mask of the tokens that count: up to and including the first <eos> (later ones are padding)."""
    eos = (tokens == EOS).long()
    before = torch.cumsum(eos, 1) - eos  # number of <eos> strictly before t
    return (before == 0).float()


class NumberReader(nn.Module):
    def __init__(self, image_size: int, size: dict):
        super().__init__()
        from transformers import Qwen3Config, Qwen3ForCausalLM

        h, self.prefix = size["hidden"], size["prefix"]
        c = size["channels"]
        feat = 2 * c * (image_size // 4) ** 2
        self.encoder = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(feat, self.prefix * h))
        cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=h, intermediate_size=size["intermediate"],
                          num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
                          num_key_value_heads=size["kv_heads"], head_dim=h // size["heads"],
                          max_position_embeddings=self.prefix + 8, rope_theta=10000.0, tie_word_embeddings=True,
                          pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, attn_implementation="sdpa")
        self.lm = Qwen3ForCausalLM(cfg)

    def image_prefix(self, images: torch.Tensor) -> torch.Tensor:
        """(n, prefix, hidden) embeddings of (n, S, S) images."""
        return self.encoder(images[:, None]).view(len(images), self.prefix, -1)

    def token_logits(self, prefix: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Logits at the token positions: row t predicts token t + 1."""
        emb = self.lm.get_input_embeddings()(tokens)
        out = self.lm(inputs_embeds=torch.cat([prefix, emb], 1), use_cache=False).logits
        return out[:, prefix.shape[1]:]

    def answer_logp(self, prefix: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """(n, 3) log-probabilities of the answer tokens given the image and <bos>."""
        tokens = torch.cat([torch.full((len(answers), 1), BOS, dtype=torch.long), answers[:, :-1]], 1)
        logp = torch.log_softmax(self.token_logits(prefix, tokens).float(), -1)
        return logp.gather(-1, answers[:, :, None])[..., 0]

    @torch.no_grad()
    def generate(self, prefix: torch.Tensor, greedy: bool, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """(n, 3) answer tokens, greedy or sampled at ``temperature``."""
        tokens = torch.full((len(prefix), 1), BOS, dtype=torch.long)
        for _ in range(ANSWER_TOKENS):
            logits = self.token_logits(prefix, tokens)[:, -1].float()
            if greedy:
                nxt = logits.argmax(-1)
            else:
                nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)[:, 0]
            tokens = torch.cat([tokens, nxt[:, None]], 1)
        return tokens[:, 1:]


def build_model(s: dict, seed: int) -> NumberReader:
    torch.manual_seed(seed)
    return NumberReader(s["image_size"], s["model"])


def predict(model: NumberReader, images: np.ndarray, batch: int = 512) -> np.ndarray:
    """Greedy answers of the model for (n, S, S) images (NaN where malformed)."""
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(images), batch):
            x = torch.as_tensor(images[i:i + batch])
            out.append(parse_answers(model.generate(model.image_prefix(x), greedy=True)))
    return np.concatenate(out)


def sample_answers(model: NumberReader, images: np.ndarray, k: int, temperature: float, seed: int,
                   batch: int = 512) -> np.ndarray:
    """(n, k) sampled answers at ``temperature`` (NaN where malformed), from one seeded generator: the same
    seed gives every model the same random numbers (common random numbers across arms)."""
    model.eval()
    gen, out = torch.Generator().manual_seed(seed), []
    with torch.no_grad():
        for i in range(0, len(images), batch):
            x = torch.as_tensor(images[i:i + batch]).repeat_interleave(k, 0)
            ans = model.generate(model.image_prefix(x), greedy=False, temperature=temperature, generator=gen)
            out.append(parse_answers(ans).reshape(-1, k))
    return np.concatenate(out)
