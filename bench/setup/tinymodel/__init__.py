"""cellbench's built-in tiny model: a random ~1.7 M-parameter Llama chat model, built locally.

It needs no download and no torch, yet real servers load it (llama-server from the GGUF;
transformers, vLLM and mlx-lm from the HF folder), so the whole benchmark path can be exercised
anywhere in seconds. Its text is gibberish by design: it measures servers, not answers.
"""

from bench.setup.tinymodel.build import RECIPE_VERSION, TinyModel, build, ensure_tiny_model
from bench.setup.tinymodel.template import chat_template, render_chat

__all__ = ["RECIPE_VERSION", "TinyModel", "build", "chat_template", "ensure_tiny_model", "render_chat"]
