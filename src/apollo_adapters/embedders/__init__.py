"""Embedders: hashing (no model), sentence-transformers, OpenAI-compatible HTTP, LRU cache."""

from .caching import CachingEmbedder
from .hashing import HashingEmbedder
from .openai import OpenAIEmbedder
from .sentence import SentenceTransformerEmbedder

__all__ = [
    "CachingEmbedder",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
]
