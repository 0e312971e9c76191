"""The domain catalog and phenotypes: schema, loading and validation, and the offline domain classifier."""
