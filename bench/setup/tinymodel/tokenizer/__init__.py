"""The tiny model's tokenizer: its hand-written training text (`text`), the corpus generated from
it (`corpus`), and the byte-level BPE trained on that corpus (`bpe`)."""
