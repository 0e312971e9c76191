"""`intake-eval export`: a run folder as a dataset (Parquet tables, and for the Hugging Face hub a dataset card)."""
