"""The judge stage: judge prompts, answer schemas, parsing and repair, per-turn and per-conversation judging."""
