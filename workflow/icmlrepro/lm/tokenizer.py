"""A word-level tokenizer trained offline with `tokenizers` on the task corpus, as a transformers tokenizer.

Whitespace-separated symbols, each digit its own token; special tokens for padding, begin and end
of sequence. Saved next to the model with ``save_pretrained`` and loaded with ``from_pretrained``.
"""

from __future__ import annotations

from typing import Iterable

from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"


def train_tokenizer(texts: Iterable[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Digits(individual_digits=True)])
    trainer = trainers.WordLevelTrainer(special_tokens=[PAD, BOS, EOS, UNK], min_frequency=1)
    tok.train_from_iterator(texts, trainer=trainer)
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, bos_token=BOS, eos_token=EOS,
                                   unk_token=UNK)
    fast.padding_side = "left"  # batched generation appends on the right
    return fast


def decode(tokenizer: PreTrainedTokenizerFast, ids) -> str:
    """Token ids back to task text (symbols joined by single spaces, special tokens dropped)."""
    return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
