"""smith: train one language model to build reusable tools and to use them (SMITH, DAPO)."""

__version__ = "0.1.0"
