"""GQA as text: compositional questions over an image's scene graph, out of domain for SMITH (paper,
"Out-of-domain generalization").

    python eval.py suite=gqa model=SPEC suite.data=PATH suite.scenes=PATH [suite.train_data=PATH] \
        mode=cot|build_use|pool|latm|craft|trove|ktce [limit=N] [output_dir=D]

Runs on the rg machinery (smith.evals.rg with a `FileSource`): every rg mode and baseline, the same
episodes, sandbox, budgets, outputs and resuming; only the questions and their scoring differ.

Files (local; nothing is downloaded), GQA's own formats (Hudson & Manning 2019):
- questions (`suite.data`, `suite.train_data`): `{split}_balanced_questions.json`, one JSON object mapping a
  question id to `{imageId, question, answer, types: {structural, semantic}}`, or JSONL with one question a
  line and its id in `qid`;
- scene graphs (`suite.scenes`, one path or a list): `{split}_sceneGraphs.json`, one JSON object mapping an
  image id to `{width, height, objects: {object id: {name, x, y, w, h, attributes, relations: [{name,
  object}]}}}`.

The image is replaced by its scene graph rendered as text (one line per object: id, name, box, attributes,
relations to other objects by id and name), so text-only models and their tools can answer; the question
follows, with LLaVA's GQA instruction "Answer the question using a single word or phrase." Categories are
GQA's (semantic, structural) question types, e.g. `rel_query`, grouped by the structural type (verify,
query, choose, logical, compare); a tool is made per category.

Scoring: GQA's accuracy is exact match of the predicted and gold answers (its eval.py); predictions are
normalised as LLaVA's convert_gqa_for_eval does before that script (trailing "." dropped, lower-cased),
plus surrounding whitespace stripped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from smith.config import knob
from smith.evals.suite import Suite
from smith.tasks import Item

from .rg.config import RgConfig, RgEval
from .rg.sources import FileSuite

STRUCTURAL = ("verify", "query", "choose", "logical", "compare")
SEMANTIC = ("obj", "attr", "cat", "rel", "global")
GROUPS = {f"{se}_{st}": st for st in STRUCTURAL for se in SEMANTIC}
INSTRUCTION = "Answer the question using a single word or phrase."


def _read(path: str, id_key: str) -> dict[str, dict[str, Any]]:
    """A GQA JSON object id -> record, or JSONL with the id in `id_key`."""
    text = Path(path).read_text()
    if Path(path).suffix == ".jsonl":
        return {str(r[id_key]): r for r in (json.loads(line) for line in text.splitlines() if line.strip())}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("a .json file must be one object mapping ids to records")
    return {str(k): v for k, v in data.items()}


@cache
def _scenes(paths: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for p in paths:
        out.update(_read(p, "imageId"))
    return out


def render_scene(scene: dict[str, Any]) -> str:
    """A scene graph as text: one line per object, its box, attributes and outgoing relations."""
    objects = scene["objects"]
    lines = [f"Scene graph of the image ({scene.get('width', '?')}x{scene.get('height', '?')} pixels; boxes are "
             "x, y, width, height):"]
    for oid, o in objects.items():
        line = f"- {oid}: {o['name']} at ({o['x']}, {o['y']}, {o['w']}, {o['h']})"
        if o.get("attributes"):
            line += "; attributes: " + ", ".join(o["attributes"])
        rels = [f"{r['name']} {r['object']} ({objects[r['object']]['name']})" for r in o.get("relations", [])
                if r["object"] in objects]
        if rels:
            line += "; relations: " + ", ".join(rels)
        lines.append(line)
    return "\n".join(lines)


@dataclass
class GqaConfig(RgConfig):
    """`suite.*` of suite=gqa: rg's settings (tokens, turns, sandbox, baselines and their budgets) apply
    unchanged, with the benchmark's files."""

    name: str = knob("gqa", "the suite", choices=("gqa",))
    n_items: int | None = knob(None, "questions per category ((semantic, structural) type); null = all (limit=N "
                               "caps it)", min=1)
    cot_max_new_tokens: int = knob(1024, "the CoT baseline's reply", min=1)
    data: str | None = knob(None, "the held-out questions: GQA's {split}_balanced_questions.json or JSONL")
    train_data: str | None = knob(None, "solved questions tools are made from (all modes but cot); e.g. "
                                  "train_balanced_questions.json")
    scenes: Any = knob(None, "GQA's {split}_sceneGraphs.json: one path or a list covering every question's image")


@dataclass
class GqaEval(RgEval):
    """`python eval.py suite=gqa`."""

    suite: GqaConfig = knob(factory=GqaConfig)


def load(path: str, cfg: GqaEval) -> list[Item]:
    """Items of one GQA questions file, each with its image's scene graph as text."""
    paths = cfg.suite.scenes
    if not paths:
        raise ValueError("suite.scenes=PATH (GQA scene graphs) is needed to render the images as text")
    paths = tuple(map(str, paths)) if isinstance(paths, list) else (str(paths),)
    for p in paths:
        if not Path(p).is_file():
            raise ValueError(f"suite.scenes: {p} is not a file")
    scenes = _scenes(paths)
    out = []
    for qid, q in _read(path, "qid").items():
        if q["imageId"] not in scenes:
            raise ValueError(f"question {qid}: image {q['imageId']} is in no file of suite.scenes")
        category = f"{q['types']['semantic']}_{q['types']['structural']}"
        text = f"{render_scene(scenes[q['imageId']])}\n\nQuestion: {q['question']}\n{INSTRUCTION}"
        out.append(Item(qid, category, "gqa", text, str(q["answer"]), {"answer": str(q["answer"])}))
    return out


def normalize(answer: str) -> str:
    """LLaVA's GQA prediction clean-up: whitespace and a trailing "." dropped, lower case."""
    return answer.strip().rstrip(".").lower()


def correct(answer: str, entry: dict[str, Any]) -> bool:
    """GQA's exact match after normalisation."""
    return normalize(answer) == normalize(entry["answer"])


FILES = FileSuite(load, GROUPS, correct)
check, run = FILES.check, FILES.run
SUITE = Suite("gqa", check, run, GqaEval)  # the suite interface (smith.evals)
