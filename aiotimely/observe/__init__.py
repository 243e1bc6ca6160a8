"""Looking inside a running computation: its graph, frontiers and capabilities, metrics, and the live page."""
