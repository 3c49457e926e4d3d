"""`python -m smith.evals.bor`: see `smith.evals.bor.cli`."""

from smith.evals.bor.cli import main

main()
