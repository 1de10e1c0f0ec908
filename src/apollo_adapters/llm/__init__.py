"""Language models: an OpenAI-compatible chat adapter (contradiction judge, GAS, text
splitter)."""

from .openai_chat import OpenAIChatModel

__all__ = ["OpenAIChatModel"]
