"""The shared small-language-model substrate: long chain-of-thought tasks, tokenizer, Qwen3 models.

AsyncSpade, OnlineSPEC and On-Policy SFT need a language model whose attention and outputs are
real, that runs on 2 CPU cores, and whose loading code is the one a user points at real Qwen3
weights on a cluster. ``tasks`` generates verifiable reasoning tasks with long traces,
``tokenizer`` trains the vocabulary, ``model`` builds/loads the transformers Qwen3 architecture,
``train`` fits it, ``decode`` generates with the KV cache and a pluggable attention hook.
"""
