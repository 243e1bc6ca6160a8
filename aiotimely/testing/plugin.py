"""The pytest plugin (entry point ``pytest11``): fixtures for testing dataflows."""
