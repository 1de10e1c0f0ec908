"""The ``apollo`` command line."""

from .ingest import parse_line
from .main import build_parser, main

__all__ = ["build_parser", "main", "parse_line"]
