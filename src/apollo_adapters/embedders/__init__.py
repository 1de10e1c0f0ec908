"""Embedders: hashing (no model), sentence-transformers (PyTorch or ONNX Runtime),
OpenAI-compatible HTTP, LRU cache."""

from .caching import CachingEmbedder
from .hashing import HashingEmbedder
from .onnx import OnnxEmbedder
from .openai import OpenAIEmbedder
from .sentence import SentenceTransformerEmbedder

__all__ = [
    "CachingEmbedder",
    "HashingEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
]
