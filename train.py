"""Train a policy with SMITH:  python train.py recipe=tiny  |  accelerate launch train.py recipe=qwen3-4b"""

from smith.config import main_entry


def _run(cfg):  # noqa: ANN001
    from smith.train import run

    run(cfg)


if __name__ == "__main__":
    main_entry("config", ("recipe",), _run)
