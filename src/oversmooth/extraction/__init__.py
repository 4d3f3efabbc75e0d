"""Logit extraction to Parquet: writing (`logits`) and reading (`logit_tables`, no torch)."""
