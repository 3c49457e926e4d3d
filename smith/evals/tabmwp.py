"""TabMWP-Hard: math word problems over tables, out of domain for SMITH (paper, "Out-of-domain generalization").

    python eval.py suite=tabmwp model=SPEC suite.data=PATH [suite.train_data=PATH] \
        mode=cot|build_use|pool|latm|craft|trove|ktce [limit=N] [output_dir=D]

Runs on the rg machinery (smith.evals.rg with a `FileSource`): every rg mode and baseline, the same
episodes, sandbox, budgets, outputs and resuming; only the questions and their scoring differ.

Files (local; nothing is downloaded): TabMWP's own format (Lu et al. 2023, PromptPG, `data/tabmwp/
problems_{train,dev,test}.json`): one JSON object mapping a problem id to its problem, or JSONL with one
problem per line and its id in `pid`. Fields read: `question`, `answer`, `table` (the table as text, cells
separated by " | "), `table_title`, `unit`, `choices` (null for free-text questions) and `ans_type`. TabMWP-Hard
is whatever subset you pass as `suite.data`; smith does not select it. `suite.train_data` (e.g.
problems_train.json) holds the solved problems tools are made from; problems whose question text is also in
`suite.data` are never used as examples.

Question text, as in PromptPG's prompt: the table (with its `[TITLE]:` line), the question with `(Unit: u)`
when the problem has a unit, and `Options: (A) ... (B) ...` for a multiple-choice one. Tools receive that
text like any rg question. Categories are TabMWP's answer types (integer_number, decimal_number: group
"Free text"; extractive_text, boolean_text, other_text: group "Multi-choice"); a tool is made per category.

Scoring, as TabMWP's evaluation (PromptPG run_gpt3: extract_prediction, normalize_answer): from the final
answer, a multiple-choice prediction is an option letter ("B", "(b)", "The answer is B") mapped to its option,
else the most similar option by word overlap; a free-text prediction is what follows "The answer is" (the
benchmark's prompts make every reply start so; smith's final `Answer:` line is read as that sentence).
Prediction and gold are then normalised -- a leading "$" and a trailing
",", "." or "/" dropped; a number loses its thousands commas, a fraction becomes its value, and numbers are
rounded to 3 decimals (the benchmark's numeric tolerance, "0.3333" = "1/3"), trailing ".0" removed; text
loses the unit -- and must be equal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smith.config import knob
from smith.evals.suite import Suite
from smith.tasks import Item

from .rg.config import RgConfig, RgEval
from .rg.sources import FileSuite

# TabMWP's answer types and question types (its paper's FREE: INT, DEC; MC: EXTR, BOOL, OTH)
GROUPS = {"integer_number": "Free text", "decimal_number": "Free text", "extractive_text": "Multi-choice",
          "boolean_text": "Multi-choice", "other_text": "Multi-choice"}
OPTION_LETTERS = "ABCDEFGH"


def read_problems(path: str) -> list[tuple[str, dict[str, Any]]]:
    """(pid, problem) pairs of a TabMWP file: a JSON object pid -> problem, or JSONL with `pid` per line."""
    text = Path(path).read_text()
    if Path(path).suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [(str(r["pid"]), r) for r in rows]
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("a .json file must be one object mapping problem ids to problems")
    return [(str(pid), p) for pid, p in data.items()]


def question_text(p: dict[str, Any]) -> str:
    """The problem as PromptPG's prompt shows it: titled table, question (with unit), options."""
    table = p["table"] if not p.get("table_title") else f"[TITLE]: {p['table_title']}\n{p['table']}"
    question = p["question"] + (f" (Unit: {p['unit']})" if p.get("unit") else "")
    if p.get("choices"):
        question += "\nOptions: " + " ".join(f"({OPTION_LETTERS[i]}) {c}" for i, c in enumerate(p["choices"]))
    return f"Table:\n{table}\n\nQuestion: {question}"


@dataclass
class TabmwpConfig(RgConfig):
    """`suite.*` of suite=tabmwp: rg's settings (tokens, turns, sandbox, baselines and their budgets) apply
    unchanged, with the benchmark's files."""

    name: str = knob("tabmwp", "the suite", choices=("tabmwp",))
    n_items: int | None = knob(None, "questions per category (answer type); null = all of the file (limit=N caps it)",
                               min=1)
    cot_max_new_tokens: int = knob(2048, "the CoT baseline's reply", min=1)
    data: str | None = knob(None, "the held-out questions: PromptPG's problems_*.json or JSONL (one problem a line)")
    train_data: str | None = knob(None, "solved problems tools are made from (all modes but cot); e.g. "
                                  "problems_train.json")


@dataclass
class TabmwpEval(RgEval):
    """`python eval.py suite=tabmwp`."""

    suite: TabmwpConfig = knob(factory=TabmwpConfig)


def load(path: str, cfg: TabmwpEval) -> list[Item]:
    """Items of one TabMWP file; `entry` keeps what scoring needs (answer, unit, choices)."""
    out = []
    for pid, p in read_problems(path):
        if p["ans_type"] not in GROUPS:
            raise ValueError(f"problem {pid}: ans_type {p['ans_type']!r} is not one of {', '.join(GROUPS)}")
        entry = {"answer": str(p["answer"]), "unit": p.get("unit") or "", "choices": p.get("choices") or None}
        out.append(Item(pid, p["ans_type"], "tabmwp", question_text(p), str(p["answer"]), entry))
    return out


def normalize(text: str, unit: str) -> str:
    """TabMWP's answer normalisation: "$1,000." -> "1000", "3/4" -> "0.75", "2.50" -> "2.5"; text loses the unit."""
    text = re.sub(r"[,./]$", "", re.sub(r"^\$", "", text))
    if not re.fullmatch(r"[-+]?[\d,./]+", text):
        return text.replace(unit, "").strip() if unit else text
    text = text.replace(",", "")
    try:
        if re.fullmatch(r"[-+]?\d+", text):
            number: int | float = int(text)
        elif "/" in text:
            num, den = text.split("/")
            number = round(float(num) / float(den), 3)
        else:
            number = round(float(text), 3)
    except (ValueError, ZeroDivisionError):
        return text
    return re.sub(r"\.0+$", "", str(number))


def _similarity(a: str, b: str) -> float:
    """PromptPG's option similarity: 2 for equal strings, else the share of shared words."""
    if a == b:
        return 2.0
    wa, wb = a.split(" "), b.split(" ")
    return len(set(wa) & set(wb)) / max(len(wa), len(wb)) if " " in a or " " in b else 0.0


_LETTER = (r"^\(([A-Za-z])\)$", r"^([A-Za-z])$", r"^([A-Za-z])\. ", r"[Tt]he answer is ([A-Z])\b",
           r"^\(([A-Za-z])\) [\s\S]+$", r"[Tt]he answer is \(([A-Za-z])\) [\s\S]+$")
_NUMBER = (r"[Tt]he answer is ([\s\S]+)$", r"[Tt]he table shows that ([\d$.,/:]+) ", r" = ([\d$.,/:]+)",
           r"(?<= be| is) ([-\d$.,/:]*\d)", r"(?<= are| was) ([-\d$.,/:]*\d)", r"(?<= were) ([-\d$.,/:]*\d)",
           r" ([\d$.,/:]+ [AP]\.M\.)", r"([-\d$.,/:]*\d)")


def extract(output: str, choices: list[str] | None) -> str:
    """The prediction in a reply, by TabMWP's rules (an option for multiple choice, else a number span)."""
    output = re.sub(r"\$?\\frac\{([\d.,-]+)\}\{([\d.,]+)\}\$?", r"\1/\2", output)
    output = re.sub(r"(?<![AP]\.M)\.$", "", output).replace("\u2212", "-")
    if choices:
        for pattern in _LETTER:
            found = re.findall(pattern, output)
            if found and found[0].upper() in OPTION_LETTERS[: len(choices)]:
                return choices[OPTION_LETTERS.index(found[0].upper())]
        scores = [_similarity(c, output) for c in choices]
        return choices[scores.index(max(scores))]
    if not re.search(r"[Tt]he answer is", output):  # smith's `Answer:` line is the benchmark's "The answer is"
        output = f"The answer is {output}"
    for pattern in _NUMBER:
        found = re.findall(pattern, output)
        if found:
            pred = found[-1].strip()
            return pred[:-1] if pred.endswith(".") and ".M." not in pred else pred
    return output


def correct(answer: str, entry: dict[str, Any]) -> bool:
    """TabMWP's exact match after extraction and normalisation."""
    pred = extract(answer, entry["choices"])
    return normalize(pred, entry["unit"]) == normalize(entry["answer"], entry["unit"])


FILES = FileSuite(load, GROUPS, correct)
check, run = FILES.check, FILES.run
SUITE = Suite("tabmwp", check, run, TabmwpEval)  # the suite interface (smith.evals)
