"""Tier-1 stages: each a small object with ``name`` and ``run(state) -> (state, summary)``."""
