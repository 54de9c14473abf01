"""Supervised execution: provider command lines, stream parsing and verdicts."""
