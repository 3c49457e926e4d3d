"""The separate virtualenv bfcl-eval runs in, and how to create it.

Why a separate venv: bfcl-eval 2026.3.23 pins numpy==1.26.4 while smith pins numpy==2.4.6, so the `bfcl`
extra cannot be installed into smith's own venv. bfcl-eval also requires sentence-transformers and
faiss-cpu, which only its `memory_vector` category imports (it downloads an embedding model, so it is not
an offline category); they are left out, which keeps torch out of this venv. Every other package is
pinned to the closure that was resolved and tested with bfcl-eval 2026.3.23 on Python 3.11.

    python -m smith.evals.bfcl.venv [DIR]        # default DIR: .cache/bfcl-venv in the repository

The suite runs `DIR/bin/python` on smith/evals/bfcl/runner.py; nothing of smith is installed there.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from pathlib import Path

BFCL_EVAL = "bfcl-eval==2026.3.23"
# the dependency closure of bfcl-eval 2026.3.23 minus sentence-transformers / faiss-cpu (memory_vector only),
# plus soundfile, which qwen-agent imports at import time without declaring it
PINS = (
    "aiohappyeyeballs==2.7.1", "aiohttp==3.14.5", "aiosignal==1.4.0", "annotated-doc==0.0.7",
    "annotated-types==0.8.0", "anthropic==2.14.0", "anyio==4.16.0", "argcomplete==3.7.2", "attrs==26.1.0",
    "beautifulsoup4==4.15.0", "black==26.10.1", "boto3==1.44.8", "botocore==1.44.8", "certifi==2026.10.19.post1",
    "cffi==2.1.1", "charset-normalizer==3.5.3", "click==8.5.1", "cohere==5.18.0", "cryptography==50.0.2",
    "dashscope==2.0.2", "datamodel-code-generator==0.25.7", "distro==1.9.0", "dnspython==2.9.2",
    "docstring_parser==0.18.0", "dotenv==0.9.9", "email-validator==2.4.0", "eval_type_backport==0.4.0",
    "fastapi==0.165.0", "fastavro==1.13.1", "filelock==3.20.0", "frozenlist==1.8.0", "fsspec==2026.9.0",
    "genson==1.4.0", "google-auth==2.63.0", "google-genai==3.6.1", "google_search_results==2.4.2", "h11==0.16.0",
    "hf-xet==1.8.0", "html2text==2025.4.15", "httpcore==1.0.9", "httpcore2==2.16.2", "httpx==0.28.1",
    "httpx-sse==0.4.0", "httpx2==2.16.2", "huggingface_hub==2.4.0", "idna==3.20", "inflect==5.6.2", "isort==5.13.2",
    "Jinja2==3.1.6", "jiter==0.19.0", "jmespath==1.1.0", "json5==0.17.3", "jsonlines==4.0.0", "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1", "markdown-it-py==4.3.0", "MarkupSafe==3.0.4", "mdurl==0.1.2",
    "mistralai==1.7.0", "mpmath==1.3.0", "multidict==7.2.1", "mypy_extensions==1.2.0", "networkx==3.3",
    "numpy==1.26.4", "openai==3.57.0", "opentelemetry-api==1.45.2", "opentelemetry-sdk==1.45.2",
    "opentelemetry-semantic-conventions==0.66b2", "overrides==7.7.0", "packaging==26.4", "pandas==3.0.6",
    "pathspec==1.1.1", "pillow==13.0.0", "platformdirs==4.14.8", "propcache==0.5.4", "pyasn1==0.6.5",
    "pyasn1_modules==0.4.2", "pycparser==3.12", "pydantic==2.14.4", "pydantic_core==2.50.5", "Pygments==2.21.0",
    "python-dateutil==2.9.0.post0", "python-dotenv==1.2.4", "pytokens==0.4.1", "PyYAML==6.0.4", "qwen-agent==0.0.34",
    "rank-bm25==0.2.2", "referencing==0.37.0", "regex==2026.11.19", "requests==2.34.2", "rich==15.0.0",
    "rpds-py==2026.9.1", "s3transfer==0.19.3", "shellingham==1.5.4", "six==1.17.0", "sniffio==1.3.1",
    "soundfile==0.14.0", "soupsieve==4.1.3", "starlette==1.10.0", "tabulate==0.10.0", "tenacity==9.1.4",
    "tiktoken==0.14.0", "tokenizers==0.23.3", "tqdm==4.70.1", "tree-sitter==0.21.3", "tree-sitter-java==0.21.0",
    "tree-sitter-javascript==0.21.4", "truststore==0.10.5", "typer==0.29.2", "types-requests==2.33.0.20261030",
    "typing-inspection==0.4.5", "typing_extensions==4.16.0", "urllib3==2.8.0", "uvicorn==0.54.0",
    "websocket-client==1.9.2", "websockets==17.4", "writer-sdk==3.0.0", "yarl==1.25.1",
)
DEFAULT_DIR = Path(__file__).resolve().parents[3] / ".cache" / "bfcl-venv"


def python_of(venv_dir: str | Path) -> Path:
    return Path(venv_dir) / "bin" / "python"


def has_bfcl(python: str | Path) -> bool:
    """True if `python` exists and has bfcl-eval (checked by metadata, not by importing it: that takes ~10 s)."""
    if not Path(python).is_file():
        return False
    probe = "import importlib.metadata as m; print(m.version('bfcl-eval'))"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False)
    return done.returncode == 0 and done.stdout.strip() == BFCL_EVAL.split("==")[1]


def create(venv_dir: str | Path = DEFAULT_DIR) -> Path:
    """Create (or complete) the venv at `venv_dir` with bfcl-eval and the pins above; returns its python."""
    python = python_of(venv_dir)
    if has_bfcl(python):
        return python
    if not python.is_file():
        venv.EnvBuilder(with_pip=True, clear=False).create(str(venv_dir))
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *PINS], check=True)
    subprocess.run([*pip, "--no-deps", BFCL_EVAL], check=True)
    if not has_bfcl(python):
        raise RuntimeError(f"installing {BFCL_EVAL} into {venv_dir} did not succeed; see pip's output above")
    return python


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m smith.evals.bfcl.venv", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="?", default=str(DEFAULT_DIR))
    a = p.parse_args(argv)
    print(f"bfcl-eval ready: {create(a.dir)}", file=sys.stderr)


if __name__ == "__main__":
    main()
