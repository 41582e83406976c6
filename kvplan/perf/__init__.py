"""Serving performance: the per-step time model (step_time) and its GPU data and coefficients."""
