"""Run-vs-run and judge-vs-judge comparisons: paired differences and the sensitivity of conclusions."""
