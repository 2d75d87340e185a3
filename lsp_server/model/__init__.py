"""The model: its client (any OpenAI-compatible endpoint) and what runfix tells it."""
