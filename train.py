"""Train a policy with SMITH:  python train.py recipe=tiny  |  accelerate launch train.py recipe=qwen3-4b"""

from smith.entry import train_main

if __name__ == "__main__":
    train_main()
