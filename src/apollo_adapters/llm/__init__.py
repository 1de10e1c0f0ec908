"""Language models: an OpenAI-compatible chat adapter (contradiction judge and GAS)."""

from .openai_chat import OpenAIChatModel

__all__ = ["OpenAIChatModel"]
