"""Evaluate a model or checkpoint:  python eval.py suite=rg model=checkpoints/<run>/step-60"""

from smith.entry import eval_main

if __name__ == "__main__":
    eval_main()
