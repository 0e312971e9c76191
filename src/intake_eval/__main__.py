"""`python -m intake_eval …` runs the same CLI as the `intake-eval` script."""

from intake_eval.cli import main

main()
