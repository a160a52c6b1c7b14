"""The load generator: drives an OpenAI-compatible API at fixed concurrency and records every request."""
