"""The generate stage: seeded sampling (stages 1-5) and rendering with QC (stage 6) into profiles.jsonl."""
