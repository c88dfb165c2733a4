"""The feature bank: frozen encoders run once per recording, and every recipe and context length reads slices of
the result (docs/feature_bank.md)."""
