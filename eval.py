"""Evaluate a model or checkpoint:  python eval.py suite=rg model=checkpoints/<run>/step-60"""

from smith.config import main_entry


def _run(cfg):  # noqa: ANN001
    from smith.evals import run

    run(cfg)


if __name__ == "__main__":
    main_entry("eval", ("suite",), _run)
