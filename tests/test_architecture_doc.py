"""docs/architecture.md is the repository's design doc: nothing cites an outside design file, every heading cited
exists, every repository path, `smith.` / `sandbox.` name and config key it mentions exists, and the reward
constants it states are the code's and the config's."""

from __future__ import annotations

import ast
import inspect
import os
import re
from pathlib import Path

import pytest

from smith.rewards import format as format_module
from smith.rewards import judge as judge_module
from smith.rewards import use as use_module

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
SKIP_DIRS = {".venv", ".cache", "checkpoints", ".git", "__pycache__", ".pytest_cache", ".ruff_cache"}
OLD_DESIGN_FILE = "DESIGN" + ".md"  # spelt in two parts so this file does not cite it
TOP_DIRS = ("smith", "sandbox", "tests", "docs", "recipes", "benchmarks", "scripts")


def repo_files(suffixes: tuple[str, ...]) -> list[Path]:
    found = []
    for here, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        found += [Path(here) / f for f in files if f.endswith(suffixes)]
    return found


def doc_text() -> str:
    assert DOC.is_file(), "docs/architecture.md is missing"
    return DOC.read_text()


def test_nothing_cites_the_old_design_file():
    citing = [str(p.relative_to(ROOT)) for p in repo_files((".py", ".md", ".yaml", ".toml"))
              if OLD_DESIGN_FILE in p.read_text(errors="replace")]
    assert not citing, f"cite docs/architecture.md instead of {OLD_DESIGN_FILE} in {citing}"


def test_citations_name_headings_of_the_doc():
    """Code cites the doc as `docs/architecture.md, "<heading>"`: every cited heading must exist."""
    headings = set(re.findall(r"^#{2,3} (.+)$", doc_text(), re.M))
    cited = {}
    for path in repo_files((".py", ".md", ".yaml", ".toml")):
        if path != DOC:
            for heading in re.findall(r'architecture\.md\)?[,:]\s*"([^"]+)"', path.read_text(errors="replace")):
                cited.setdefault(heading, str(path.relative_to(ROOT)))
    assert len(cited) >= 6, cited  # the code cites most sections
    unknown = {h: where for h, where in cited.items() if h not in headings and not h.startswith("<")}
    assert not unknown, f"citations of headings docs/architecture.md does not have: {unknown}; headings: {headings}"


def mentioned_paths(text: str) -> set[str]:
    """Repository paths: tokens under a top-level directory (anywhere, code blocks included) and backticked
    root files (`train.py`); tokens with placeholders (<run>, {x}) are not paths."""
    top = "|".join(TOP_DIRS)
    paths = set(re.findall(rf"(?<![\w./<-])((?:{top})/[\w./*<>{{}}-]*)", text))
    paths |= set(re.findall(r"`([\w.-]+\.(?:py|md|yaml|toml))`", text))
    return {p.rstrip(".,;:)") for p in paths if not re.search(r"[<>{}]", p)}


def test_every_path_in_the_doc_exists():
    paths = mentioned_paths(doc_text())
    assert len(paths) > 30, sorted(paths)  # the doc cites many files; the extraction must find them
    missing = sorted(p for p in paths if not (any(ROOT.glob(p)) if "*" in p else (ROOT / p).exists()))
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def module_names(path: Path) -> set[str]:
    """Top-level names a module defines or imports."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def resolves(dotted: str) -> bool:
    """`smith.a.b.name`: the longest prefix that is a module or package, then a name defined in it (read from the
    source: no imports, so no model or torch load)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            rest = parts[cut:]
            return not rest or rest[0] in module_names(source) or (base / f"{rest[0]}.py").is_file()
    return False


def config() -> dict:
    """The training config's keys and defaults: the typed schema, smith.config.TrainConfig."""
    from omegaconf import OmegaConf

    from smith.config import TrainConfig

    return OmegaConf.to_container(OmegaConf.structured(TrainConfig))


def in_config(key: str, cfg: dict) -> bool:
    node = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_smith_name_in_the_doc_exists():
    names = set(re.findall(r"`((?:smith|sandbox)(?:\.\w+)+)`", doc_text()))
    assert len(names) > 10, sorted(names)
    cfg = config()  # `sandbox.url` is a config key, not a module
    missing = sorted(n for n in names if not resolves(n) and not in_config(n, cfg))
    assert not missing, f"docs/architecture.md names modules or objects that do not exist: {missing}"


def test_every_backticked_smith_name_elsewhere_exists():
    """The other docs, the README and the code's docstrings and comments: a name that moved or was renamed is
    caught here. A variable's attribute (the `sandbox.size` of a Sandbox) and a `NAME` placeholder are not names."""
    files = [*(ROOT / "docs").glob("*.md"), ROOT / "README.md", *(ROOT / "smith").rglob("*.py"),
             *(ROOT / "sandbox").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    cfg = config()
    missing = sorted(f"{path.relative_to(ROOT)}: {n}" for path in files
                     for n in set(re.findall(r"`((?:smith|sandbox)(?:\.\w+)+)`", path.read_text()))
                     if not resolves(n) and not in_config(n, cfg) and not n.endswith(".NAME") and n != "sandbox.size")
    assert not missing, missing


def test_every_config_key_in_the_doc_exists():
    cfg = config()
    keys = {k for k in re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)(?:=[^`]*)?`", doc_text()) if k.split(".")[0] in cfg}
    assert len(keys) > 10, sorted(keys)
    missing = sorted(k for k in keys if not in_config(k, cfg))
    assert not missing, f"docs/architecture.md names config keys that smith.config.TrainConfig lacks: {missing}"


def stated(text: str, name: str) -> float:
    """The value the doc's constants table gives `name` (a row `| `name` | value | ... |`)."""
    rows = re.findall(rf"^\|\s*`{re.escape(name)}`\s*\|\s*([-+0-9.e]+)\s*\|", text, re.M)
    assert len(rows) == 1, f"docs/architecture.md should state {name} in exactly one constants row, found {rows}"
    return float(rows[0])


def config_value(cfg: dict, key: str) -> float:
    node = cfg
    for part in key.split("."):
        node = node[part]
    return float(node)


CONFIG_KEYS = ["use.eta_mid", "use.eta_min", "use.max_turns", "build.n_examples", "build.k_heldout", "dapo.std_floor",
               "rewards.weights.format", "rewards.weights.evaluation", "rewards.weights.judge",
               "rewards.weights.use", "dapo.epsilon", "dapo.epsilon_high", "dapo.beta", "dapo.updates_per_batch",
               "dapo.refill_rounds", "dapo.refill_oversample"]


@pytest.mark.parametrize("key", CONFIG_KEYS)
def test_doc_states_the_config_defaults(key):
    assert stated(doc_text(), key) == config_value(config(), key), f"{key}: docs/architecture.md vs smith/config.py"


def test_doc_states_the_code_constants():
    from smith.train.advantages import ADVANTAGES

    text = doc_text()
    assert stated(text, "FORMAT_REWARD") == format_module.FORMAT_REWARD
    assert stated(text, "SYNTAX_ERROR_REWARD") == judge_module.SYNTAX_ERROR_REWARD
    assert stated(text, "MISMATCH_FACTOR") == judge_module.MISMATCH_FACTOR
    # the pure functions' library defaults are the config's (taken from smith.config, see tests/test_config.py)
    efficiency = inspect.signature(use_module.efficiency).parameters
    assert stated(text, "use.eta_mid") == efficiency["eta_mid"].default
    assert stated(text, "use.eta_min") == efficiency["eta_min"].default
    correctness = inspect.signature(use_module.correctness_reward).parameters
    assert stated(text, "use.max_turns") == correctness["max_turns"].default
    for estimate in ADVANTAGES.values():
        assert stated(text, "dapo.std_floor") == inspect.signature(estimate).parameters["std_floor"].default


def test_doc_worked_use_rewards_match_the_formula():
    """The doc's example: a correct answer after 1..5 of T = 5 turns."""
    m = re.search(r"after 1, 2, 3, 4, 5 turns is worth ([0-9., ]+)\.", doc_text())
    assert m, "the worked example of the use reward is gone from docs/architecture.md"
    worth = [float(x) for x in m.group(1).split(",")]
    assert worth == pytest.approx([use_module.correctness_reward(True, n, 5) for n in range(1, 6)])


LAYERS = {  # the doc's "Dependencies point one way", lowest first; smith.errors sits below everything
    "smith.errors": 0, "smith.config": 0, "sandbox": 1,
    "smith.episodes": 2, "smith.toolspec": 2, "smith.tasks": 2, "smith.models": 2,
    "smith.rollout": 3, "smith.rewards": 3, "smith.pool": 3,
    "smith.train": 4, "smith.evals": 4, "smith.curves": 4,
    "smith.cli": 5, "smith.entry": 5, "smith.gpu_check": 5, "smith": 5,
}


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "smith" and len(parts) > 1 else parts[0]


def _imports() -> list[tuple[str, str, list[str]]]:
    """(importing file's package, imported module, imported names) for every import in smith/ and sandbox/."""
    import ast

    out = []
    for path in [*(ROOT / "smith").rglob("*.py"), *(ROOT / "sandbox").rglob("*.py")]:
        rel = path.relative_to(ROOT).with_suffix("")
        here = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = here.rsplit(".", node.level - (rel.name == "__init__"))[0] if node.level else ""
                module = ".".join(x for x in (base, node.module or "") if x)
                out.append((_package(here), module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                out += [(_package(here), a.name, []) for a in node.names]
    return out


def test_dependencies_point_one_way():
    """Checked over every import statement, module level and inside functions, as the doc says."""
    bad = []
    for pkg, module, names in _imports():
        target = _package(module)
        if target not in LAYERS or target == pkg:
            continue
        if LAYERS[target] > LAYERS[pkg] or (pkg == "smith.evals" and target == "smith.train"):
            bad.append(f"{pkg} imports {module}")
        if pkg in ("smith.rewards", "smith.pool") and target in ("smith.rollout", "smith.rewards", "smith.pool"):
            bad.append(f"{pkg} imports {module} (same floor, doc says one way)")
        if pkg == "sandbox" and target.startswith("smith"):
            bad.append(f"sandbox imports {module}")
        bad += [f"{pkg} imports {module}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
    assert bad == []


def test_no_two_smith_modules_import_each_other():
    """Within a package too, imports form no cycle, counting imports inside functions (a lazy import that only
    dodges a cycle hides it); a package's `__init__` and its own modules are exempt, and so are imports under
    `if TYPE_CHECKING:` (annotations only: nothing is imported when the code runs)."""
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for p in (ROOT / "smith").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, path in modules.items():
        base = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                       for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                mod = ".".join(x for x in (base.rsplit(".", node.level - 1)[0] if node.level else "", node.module or "")
                               if x)
                targets = [mod, *(f"{mod}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[m] |= {t for t in targets if t in modules and not (t.startswith(m + ".") or m.startswith(t + "."))
                         and t != m}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            here = todo.pop()
            if here == goal:
                return True
            if here not in seen:
                seen.add(here)
                todo += graph[here]
        return False

    cycles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and reaches(b, a))
    assert cycles == []
