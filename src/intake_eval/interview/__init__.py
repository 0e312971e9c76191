"""The run stage: participants, the conversation loop, the post-intake formulation, the run plan."""
