"""Reproducible performance runs of Apollo, each printed beside its baseline."""
