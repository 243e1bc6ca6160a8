"""The operator library, grouped as timely groups it."""
