"""One config runs every stage: the study config, the pipeline of stages, the cost estimate."""
