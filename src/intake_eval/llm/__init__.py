"""Model layer: one async call shape for every role (see base.py)."""
