"""What a cell needs before it runs: the adapter contract, framework installs, model profiles,
prompts, the tiny model."""
