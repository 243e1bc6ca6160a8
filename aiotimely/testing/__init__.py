"""Helpers for testing dataflows: run on 1..N workers and processes, collect outputs per time, test sources."""
