"""The stage runner every command and the study go through: lock, manifest, config guard, leakage guard, pool."""
