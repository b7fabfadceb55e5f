"""ML-Embed: 3-Dimensional Matryoshka Learning (MRL over output dims, MLL over layers, MEL over the rank
of the token-embedding matrix) for multilingual text embeddings, in miniature.

Stages (one per Snakemake rule): ``data`` (CLDR names from babel: the same concept in ~30 languages,
resource groups, held-out languages, a byte-level BPE tokenizer), ``train`` (one arm x seed),
``evaluate`` (the whole rank x layer x dim grid per arm, the untrained encoder as floor), ``figures``.
"""
