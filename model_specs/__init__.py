"""Bundled Hugging Face config.json snapshots (one JSON file per model), so kvplan works offline.

Each file: {"repo_id", "aliases", "source", "config", optional "checkpoint_total_bytes" and
"params_computed_from_config"}. See SOURCES.md for where each config was found.
"""
