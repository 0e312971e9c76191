"""Could it ask? Counterfactual forks: re-run finished intakes from a turn with a supervisor's nudge."""
