"""TGB: the synthetic compositional tool benchmark of the LOTS paper (003, Appendix B.1, Table 4; B.2).

Every request is generated from a hidden scene (a table, a sensor series, a calendar, a small document
corpus) that only the tools can read, and its gold answer is computed from the scene. The registry holds
seven chain tools and eight executable distractors; larger registries add seeded synthetic distractors.

Serving is the paper's TGB format: every served tool runs once per request, the family's chain in
dependency order and every other served tool on generic arguments, and the context lists one
``<Tool>: <output>`` line per served tool in canonical order, capped at 1,500 characters. A chain step
whose producer was not served (or failed) receives an unresolved argument and errors, so removing a
tool re-executes the chain and its score carries the effect propagated downstream (B.2, E.3).

No tool that is off the family's chain ever shows the gold answer: its generic arguments are redrawn
until none of its numbers matches the gold (``exposes_gold``), so a distractor can never be credited.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import operator
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

FAMILIES = ("table_total", "table_filter", "sensor_mean", "sensor_convert", "schedule_gap",
            "doc_two_facts", "translate_fact", "fx_settle", "compute_only", "no_tool")
CONTROL_FAMILIES = ("compute_only", "no_tool")
CHAIN_TOOLS = ("TableQuery", "SensorAPI", "CalendarAPI", "DocRetrieve", "ExchangeRate", "Translate", "Calculator")
# Chain tools that return scene records (rows, readings, events, passages) rather than a computed value;
# off their chain they still show those records, which may contain any number.
RECORD_TOOLS = ("TableQuery", "SensorAPI", "CalendarAPI", "DocRetrieve")
DISTRACTORS = ("UnitConvert", "TempConvert", "CurrencyConvert", "DurationCalc", "Solver", "GoogleSearch",
               "Summarize", "Barcode")
# Table 4: each family's chain in dependency order (compute_only's Calculator is optional).
CHAINS: dict[str, tuple[str, ...]] = {
    "table_total": ("TableQuery", "Calculator"),
    "table_filter": ("TableQuery", "Calculator"),
    "sensor_mean": ("SensorAPI", "Calculator"),
    "sensor_convert": ("SensorAPI", "Calculator"),
    "schedule_gap": ("CalendarAPI", "Calculator"),
    "doc_two_facts": ("DocRetrieve", "Calculator"),
    "translate_fact": ("DocRetrieve", "Translate"),
    "fx_settle": ("DocRetrieve", "ExchangeRate", "Calculator"),
    "compute_only": ("Calculator",),
    "no_tool": (),
}
N_PER_FAMILY = 400
N_FIT = 80  # the first 80 requests of a family fit its space; the other 320 evaluate it (section 4.1)
LINE_CAP = 1500
_GUARD_TRIES = 32
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


# ----------------------------------------------------------------------------------------------- numbers
def numbers(text: str) -> list[float]:
    """Every number written in `text` (thousands separators allowed)."""
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def matches(value: float, gold: float) -> bool:
    """Answers are compared at two decimals (the Calculator's precision); 0.01 absorbs float rounding."""
    return abs(value - gold) <= 0.01 + 1e-9


def exposes_gold(text: str, gold: float) -> bool:
    return any(matches(x, gold) for x in numbers(text))


def grade(answer: str, gold: float) -> bool:
    """A request is correct when the last number of the final answer matches the gold value (B.1)."""
    found = numbers(answer)
    return bool(found) and matches(found[-1], gold)


def fmt(x: float) -> str:
    x = round(x, 2)
    return str(int(x)) if x == int(x) else f"{x:.2f}".rstrip("0")


_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv,
}


def calculate(expression: str) -> float:
    """Arithmetic only: numbers, + - * / // % **, parentheses; a bare name raises NameError as in Python."""
    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 16:
                raise ValueError("exponent too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Name):
            raise NameError(f"name '{node.id}' is not defined")
        raise SyntaxError(f"unsupported expression element {type(node).__name__}")

    return float(ev(ast.parse(expression.replace("×", "*").replace("^", "**"), mode="eval")))


# ------------------------------------------------------------------------------------------------- scenes
_ITEMS = ["bolt", "hinge", "bracket", "lamp", "kettle", "stapler", "folder", "hose", "trowel", "cable", "valve",
          "mug", "drill bit", "notebook", "planter", "ladle", "router", "marker", "clamp", "sieve"]
_CATEGORIES = ["hardware", "office", "garden", "kitchen"]
_EVENTS = ["standup", "design review", "client call", "lunch", "budget sync", "code review", "1:1", "demo",
           "planning", "retro", "interview", "training"]
_BRANDS = ["Orion", "Vega", "Lyra", "Altair", "Rigel", "Deneb", "Mira", "Castor", "Pollux", "Sirius"]
_CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD"]
_WORDS = ["lantern", "harbor", "quartz", "meadow", "falcon", "ripple", "orchard", "velvet", "glacier", "compass",
          "thimble", "saffron", "juniper", "lobster", "paprika", "walnut", "tundra", "cobalt", "marble", "pepper"]
_SENSORS = {  # quantity: (unit, conversion target, factor, offset)
    "temperature": ("°C", "°F", 1.8, 32.0),
    "pressure": ("kPa", "psi", 0.145038, 0.0),
    "wind speed": ("m/s", "km/h", 3.6, 0.0),
    "length": ("cm", "inches", 0.393701, 0.0),
}


@functools.cache
def cipher_codebook(seed: int = 0) -> dict[str, int]:
    """Ten invented digit words shared by the benchmark (the Translate tool's dictionary)."""
    rng = random.Random(f"tgb-cipher:{seed}")
    onsets, vowels, codas = list("bdfgklmnprstvz"), list("aeiou"), ["", "n", "r", "sk", "l", "x"]
    words: set[str] = set()
    while len(words) < 10:
        words.add(rng.choice(onsets) + rng.choice(vowels) + rng.choice(onsets) + rng.choice(vowels)
                  + rng.choice(codas))
    return {w: d for d, w in enumerate(sorted(words))}


def _make_scene(rng: random.Random, codebook: dict[str, int]) -> dict[str, Any]:
    """All four hidden sources, so off-chain tools also have something plausible to read."""
    items = rng.sample(_ITEMS, 6)
    cats = [rng.choice(_CATEGORIES) for _ in items]
    cats[rng.randrange(6)] = cats[0]  # every filter category has at least two rows
    table = {"id": f"T-{rng.randint(1000, 9999)}",
             "rows": [{"item": it, "category": c, "qty": rng.randint(1, 20), "price": rng.randint(100, 9999) / 100}
                      for it, c in zip(items, cats, strict=True)]}
    quantity = rng.choice(sorted(_SENSORS))
    centre = {"temperature": 21, "pressure": 101, "wind speed": 8, "length": 40}[quantity]
    sensor = {"id": f"S-{rng.randint(100, 999)}", "quantity": quantity, "unit": _SENSORS[quantity][0],
              "readings": [round(centre + rng.uniform(-5, 5), 1) for _ in range(5)]}
    starts = sorted(rng.sample(range(8 * 60, 18 * 60, 5), 5))
    calendar = {"date": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "events": [{"title": t, "time": f"{m // 60:02d}:{m % 60:02d}"}
                           for t, m in zip(rng.sample(_EVENTS, 5), starts, strict=True)]}
    b1, b2, b3 = rng.sample(_BRANDS, 3)
    i1, i2 = rng.sample(_ITEMS, 2)
    base, quote = rng.sample(_CURRENCIES[:5], 2)
    digits = [rng.randint(1, 9)] + [rng.randint(0, 9) for _ in range(rng.randint(1, 2))]
    words = {d: w for w, d in codebook.items()}
    vault = rng.randint(2, 99)
    invoice = {"id": f"INV-{rng.randint(1000, 9999)}", "qty": rng.randint(2, 60), "item": f"{b3} {rng.choice(_ITEMS)}",
               "price": rng.randint(100, 20000) / 100, "currency": base, "settle": quote}
    docs = [
        {"kind": "price", "brand": b1, "item": i1, "price": rng.randint(500, 30000) / 100,
         "text": ""},
        {"kind": "price", "brand": b2, "item": i2, "price": rng.randint(500, 30000) / 100, "text": ""},
        {"kind": "cipher", "vault": vault, "phrase": "-".join(words[d] for d in digits),
         "value": int("".join(map(str, digits))), "text": ""},
        {"kind": "invoice", **invoice, "text": ""},
    ]
    for d in docs:
        if d["kind"] == "price":
            d["text"] = f"Catalogue: the {d['brand']} {d['item']} costs {d['price']:.2f} USD."
        elif d["kind"] == "cipher":
            d["text"] = f"Archive: the reserve figure of vault {d['vault']} is '{d['phrase']}' in cipher."
        else:
            d["text"] = f"Invoice {d['id']}: {d['qty']} {d['item']} at {d['price']:.2f} {d['currency']} each."
    rate = round(rng.uniform(0.5, 1.9), 4)
    fx = {"base": base, "quote": quote, "rate": rate}
    return {"table": table, "sensor": sensor, "calendar": calendar, "docs": docs, "fx": fx}


@dataclass(frozen=True)
class Request:
    """One TGB request: the visible question, the hidden scene, and the gold value computed from it."""

    id: str
    family: str
    index: int
    question: str
    scene: dict[str, Any] = field(repr=False)
    gold: float
    params: dict[str, Any] = field(default_factory=dict, repr=False)  # which scene facts the question asks

    @property
    def split(self) -> str:
        return "fit" if self.index < N_FIT else "eval"


def _question(family: str, scene: dict[str, Any], rng: random.Random) -> tuple[str, float, dict[str, Any]]:
    t, s, c, docs, fx = scene["table"], scene["sensor"], scene["calendar"], scene["docs"], scene["fx"]
    if family == "table_total":
        gold = sum(r["qty"] * r["price"] for r in t["rows"])
        return f"What is the total value (quantity times unit price, summed) of all rows in order table {t['id']}?", \
            gold, {}
    if family == "table_filter":
        cat = t["rows"][0]["category"]
        gold = sum(r["qty"] * r["price"] for r in t["rows"] if r["category"] == cat)
        return (f"In order table {t['id']}, what is the total value (quantity times unit price) of the "
                f"{cat} rows only?"), gold, {"category": cat}
    if family == "sensor_mean":
        return (f"What is the mean of the last five {s['quantity']} readings of sensor {s['id']}, "
                f"in {s['unit']}?"), sum(s["readings"]) / 5, {}
    if family == "sensor_convert":
        _, target, k, b = _SENSORS[s["quantity"]]
        return (f"What is the mean of the last five {s['quantity']} readings of sensor {s['id']}, "
                f"converted to {target}?"), sum(s["readings"]) / 5 * k + b, {"factor": k, "offset": b}
    if family == "schedule_gap":
        a, b = sorted(rng.sample(range(5), 2))
        ea, eb = c["events"][a], c["events"][b]
        mins = [int(x[:2]) * 60 + int(x[3:]) for x in (ea["time"], eb["time"])]
        return (f"On {c['date']}, how many minutes pass between the start of the {ea['title']} and the start of "
                f"the {eb['title']}?"), mins[1] - mins[0], {"first": ea["title"], "second": eb["title"]}
    if family == "doc_two_facts":
        d1, d2 = docs[0], docs[1]
        which = {"first": d1["brand"], "second": d2["brand"]}
        if rng.random() < 0.5:
            return (f"According to the catalogue, what do the {d1['brand']} {d1['item']} and the {d2['brand']} "
                    f"{d2['item']} cost together, in USD?"), d1["price"] + d2["price"], {"op": "+", **which}
        return (f"According to the catalogue, how much more (in USD, possibly negative) does the {d1['brand']} "
                f"{d1['item']} cost than the {d2['brand']} {d2['item']}?"), d1["price"] - d2["price"], \
            {"op": "-", **which}
    if family == "translate_fact":
        d = docs[2]
        return f"The archive records the reserve figure of vault {d['vault']} in cipher. What is that figure " \
               "as a number?", d["value"], {}
    if family == "fx_settle":
        inv = docs[3]
        return (f"Invoice {inv['id']} is billed in {inv['currency']}. What is its total amount settled in "
                f"{inv['settle']}?"), inv["qty"] * inv["price"] * fx["rate"], {}
    if family == "compute_only":
        a, b, d = rng.randint(12, 99), rng.randint(12, 99), rng.randint(10, 999)
        expr = rng.choice([f"{a} * {b} - {d}", f"{a} * {b} + {d}", f"({a} + {d}) * {b}"])
        return f"Compute {expr}.", calculate(expr), {"expression": expr}
    if family == "no_tool":
        w = rng.choice(_WORDS)
        kind = rng.randrange(3)
        if kind == 0:
            return f"How many letters are in the word '{w}'?", len(w), {}
        if kind == 1:
            return f"How many vowels are in the word '{w}'?", sum(ch in "aeiou" for ch in w), {}
        ch = rng.choice("abcdefghijklmnopqrstuvwxyz")
        return f"What is the position of the letter '{ch}' in the English alphabet?", ord(ch) - 96, {}
    raise ValueError(f"unknown TGB family {family!r}; known: {', '.join(FAMILIES)}")


def make_request(family: str, index: int, seed: int = 0) -> Request:
    rng = random.Random(f"tgb:{seed}:{family}:{index}")
    scene = _make_scene(rng, cipher_codebook(seed))
    question, gold, params = _question(family, scene, rng)
    return Request(f"{family}-{index:03d}", family, index, question, scene, round(gold, 2), params)


def generate(families: Iterable[str] = FAMILIES, n_per_family: int = N_PER_FAMILY, seed: int = 0) -> list[Request]:
    """The benchmark: `n_per_family` seeded requests per family (the paper: 400, 80 fitting + 320 evaluation)."""
    return [make_request(f, i, seed) for f in families for i in range(n_per_family)]


# ------------------------------------------------------------------------------------------------- tools
class Unresolved(str):
    """A chain argument whose producer did not run; any tool that receives one raises NameError."""


def _req_args(args: dict[str, Any]) -> None:
    for v in args.values():
        if isinstance(v, Unresolved):
            raise NameError(f"name '{v}' is not defined")


@dataclass(frozen=True)
class Tool:
    """A registry entry: documentation the model reads, and deterministic code over the hidden scene."""

    name: str
    description: str
    parameters: dict[str, dict[str, Any]]
    fn: Callable[[dict[str, Any], dict[str, Any]], tuple[str, Any]]  # (scene, args) -> (text, data)
    generic: Callable[[Request, random.Random], dict[str, Any]]  # generic arguments for off-chain runs

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema (what BM25, Dense and the router read)."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": self.parameters, "required": sorted(self.parameters)}}}

    def doc(self) -> str:
        return f"{self.name}({', '.join(self.parameters)}): {self.description}"

    def run(self, scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
        _req_args(args)
        return self.fn(scene, args)


def _scene_numbers(scene: dict[str, Any]) -> list[float]:
    t, s = scene["table"], scene["sensor"]
    return [r["qty"] for r in t["rows"]] + [r["price"] for r in t["rows"]] + s["readings"] + \
        [d["price"] for d in scene["docs"] if "price" in d]


def _table_query(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    t = scene["table"]
    if args["table_id"] != t["id"]:
        raise KeyError(f"table {args['table_id']!r} not found")
    rows = "; ".join(f"{r['item']} ({r['category']}) {r['qty']} x {r['price']:.2f}" for r in t["rows"])
    return f"{t['id']}: {rows}", t["rows"]


def _sensor_api(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    s = scene["sensor"]
    if args["sensor_id"] != s["id"]:
        raise KeyError(f"sensor {args['sensor_id']!r} not found")
    readings = ", ".join(f"{x:.1f}" for x in s["readings"])
    return f"{s['id']} {s['quantity']} ({s['unit']}): {readings}", s["readings"]


def _calendar_api(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    c = scene["calendar"]
    if args["date"] != c["date"]:
        return f"{args['date']}: no events", []
    return f"{c['date']}: " + "; ".join(f"{e['time']} {e['title']}" for e in c["events"]), c["events"]


def _overlap(query: str, text: str) -> int:
    q = set(re.findall(r"[a-z0-9]+", query.lower()))
    return len(q & set(re.findall(r"[a-z0-9]+", text.lower())))


def _doc_retrieve(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    docs = scene["docs"]
    order = sorted(range(len(docs)), key=lambda i: (-_overlap(args["query"], docs[i]["text"]), i))[:2]
    hits = [docs[i] for i in order]
    return " ".join(f"[{k + 1}] {d['text']}" for k, d in enumerate(hits)), hits


def _exchange_rate(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    fx = scene["fx"]
    base, quote = args["base"], args["quote"]
    if (base, quote) == (fx["base"], fx["quote"]):
        rate = fx["rate"]
    else:  # other pairs: a stable pseudo-rate derived from the pair and the scene
        h = int(hashlib.sha256(f"{base}{quote}{fx['rate']}".encode()).hexdigest()[:8], 16)
        rate = round(0.3 + (h % 15000) / 10000, 4)
    return f"{base}/{quote} = {rate:.4f}", rate


def _translate(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    book = scene["codebook"]
    parts = re.split(r"[-\s]+", args["text"].strip().lower())
    if parts and all(p in book for p in parts):
        value = int("".join(str(book[p]) for p in parts))
        return f"{args['text']} = {value}", value
    return f"(no cipher words) {args['text']}", None


def _calculator(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    value = calculate(args["expression"])
    return f"{fmt(value)}", value


def _unit_convert(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    factors = {("km", "mi"): 0.621371, ("kg", "lb"): 2.20462, ("m", "ft"): 3.28084, ("l", "gal"): 0.264172}
    k = factors.get((args["from_unit"], args["to_unit"]), 1.0)
    v = float(args["value"]) * k
    return f"{float(args['value']):g} {args['from_unit']} = {v:.4f} {args['to_unit']}", v


def _temp_convert(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    v = float(args["value"])
    out = (v - 32) / 1.8 if args["from_scale"] == "F" else v * 1.8 + 32
    other = "C" if args["from_scale"] == "F" else "F"
    return f"{v:g} °{args['from_scale']} = {out:.2f} °{other}", out


_STATIC_RATES = {"USD": 1.0, "EUR": 1.0837, "GBP": 1.2641, "JPY": 0.00672, "CHF": 1.1312, "CAD": 0.7391,
                 "AUD": 0.6618}


def _currency_convert(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    a = float(args["amount"])
    v = a * _STATIC_RATES[args["from_currency"]] / _STATIC_RATES[args["to_currency"]]
    return f"{a:.2f} {args['from_currency']} = {v:.2f} {args['to_currency']}", v


def _duration_calc(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    def mins(t: str) -> int:
        return int(t[:2]) * 60 + int(t[3:5])
    d = (mins(args["end"]) - mins(args["start"])) % (24 * 60)
    return f"{args['start']} -> {args['end']}: {d // 60} h {d % 60} min", d


def _solver(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    m = re.fullmatch(r"\s*(-?[\d.]+)\s*\*\s*x\s*([+-])\s*([\d.]+)\s*=\s*(-?[\d.]+)\s*", args["equation"])
    if not m:
        raise ValueError(f"cannot parse linear equation {args['equation']!r}")
    a, sign, b, c = float(m[1]), m[2], float(m[3]), float(m[4])
    x = (c - (b if sign == "+" else -b)) / a
    return f"{args['equation']}: x = {x:.4f}", x


def _google_search(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    h = hashlib.sha256(args["query"].encode()).hexdigest()
    n = int(h[:6], 16) % 90000 + 10000
    words = [w for w in re.findall(r"[A-Za-z]+", args["query"]) if len(w) > 3][:4] or ["results"]
    title = " ".join(w.capitalize() for w in words)
    return f"About {n:,} results: {title} - Wikipedia", n


def _summarize(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    words = re.findall(r"[A-Za-z']+", args["text"])
    keep = words[: int(args["max_words"])]
    return f"Summary: {' '.join(keep)}" + ("..." if len(words) > len(keep) else ""), None


def _barcode(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    code = re.sub(r"\D", "", str(args["code"]))[:12].rjust(12, "0")
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(code))
    full = code + str((10 - total % 10) % 10)
    return f"EAN {full}: valid, group {full[:3]}", full


def _pick(rng: random.Random, xs: list[Any]) -> Any:
    return xs[rng.randrange(len(xs))]


def _question_text(req: Request, rng: random.Random) -> str:
    words = req.question.split()
    start = rng.randrange(max(1, len(words) - 3))
    return " ".join(words[start:start + 6])


AUTHORED: tuple[Tool, ...] = (
    Tool("TableQuery", "Rows of an order table: item, category, quantity, unit price.",
         {"table_id": {"type": "string", "description": "order table id, e.g. T-1234"}}, _table_query,
         lambda r, g: {"table_id": r.scene["table"]["id"]}),
    Tool("SensorAPI", "Last five readings of a sensor, with unit.",
         {"sensor_id": {"type": "string", "description": "sensor id, e.g. S-123"}}, _sensor_api,
         lambda r, g: {"sensor_id": r.scene["sensor"]["id"]}),
    Tool("CalendarAPI", "Events (start time, title) on a date.",
         {"date": {"type": "string", "description": "YYYY-MM-DD"}}, _calendar_api,
         lambda r, g: {"date": r.scene["calendar"]["date"]}),
    Tool("DocRetrieve", "Two corpus passages that best match a query.",
         {"query": {"type": "string"}}, _doc_retrieve,
         lambda r, g: {"query": _pick(g, ["catalogue entry", "invoice units", "archive note", "invoice archive",
                                          "retails", "cipher vault"])}),
    Tool("ExchangeRate", "Exchange rate between two currencies.",
         {"base": {"type": "string"}, "quote": {"type": "string"}}, _exchange_rate,
         lambda r, g: dict(zip(("base", "quote"), g.sample(_CURRENCIES, 2), strict=True))),
    Tool("Translate", "Translates archive cipher words into English.",
         {"text": {"type": "string"}}, _translate, lambda r, g: {"text": _question_text(r, g)}),
    Tool("Calculator", "Evaluates an arithmetic expression.", {"expression": {"type": "string"}}, _calculator,
         lambda r, g: {"expression": f"{fmt(_pick(g, _scene_numbers(r.scene)))} {_pick(g, '+-*')} "
                                     f"{fmt(_pick(g, _scene_numbers(r.scene)))}"}),
    Tool("UnitConvert", "Converts length, mass or volume units.",
         {"value": {"type": "number"}, "from_unit": {"type": "string"}, "to_unit": {"type": "string"}},
         _unit_convert, lambda r, g: {"value": _pick(g, _scene_numbers(r.scene)),
                                      **dict(zip(("from_unit", "to_unit"),
                                                 _pick(g, [("km", "mi"), ("kg", "lb"), ("m", "ft"), ("l", "gal")]),
                                                 strict=True))}),
    Tool("TempConvert", "Converts Celsius and Fahrenheit.",
         {"value": {"type": "number"}, "from_scale": {"type": "string", "enum": ["C", "F"]}}, _temp_convert,
         lambda r, g: {"value": _pick(g, _scene_numbers(r.scene)), "from_scale": _pick(g, ["C", "F"])}),
    Tool("CurrencyConvert", "Converts currency at reference rates.",
         {"amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
         _currency_convert, lambda r, g: {"amount": _pick(g, _scene_numbers(r.scene)),
                                          **dict(zip(("from_currency", "to_currency"), g.sample(_CURRENCIES, 2),
                                                     strict=True))}),
    Tool("DurationCalc", "Duration between two clock times.",
         {"start": {"type": "string"}, "end": {"type": "string"}}, _duration_calc,
         lambda r, g: {"start": _pick(g, r.scene["calendar"]["events"])["time"],
                       "end": f"{g.randint(17, 23):02d}:{_pick(g, ['00', '15', '30', '45'])}"}),
    Tool("Solver", "Solves a linear equation a*x + b = c.", {"equation": {"type": "string"}}, _solver,
         lambda r, g: {"equation": f"{g.randint(2, 9)}*x + {fmt(_pick(g, _scene_numbers(r.scene)))} = "
                                   f"{g.randint(100, 999)}"}),
    Tool("GoogleSearch", "Web search: top results.", {"query": {"type": "string"}},
         _google_search, lambda r, g: {"query": _question_text(r, g)}),
    Tool("Summarize", "Summarizes a text in a few words.",
         {"text": {"type": "string"}, "max_words": {"type": "integer"}}, _summarize,
         lambda r, g: {"text": r.question, "max_words": g.randint(3, 6)}),
    Tool("Barcode", "Validates an EAN barcode.", {"code": {"type": "string"}},
         _barcode, lambda r, g: {"code": str(g.randint(10**11, 10**12 - 1))}),
)

_SYN_PREFIX = ["Tax", "Payroll", "Inventory", "Shipping", "Weather", "Loan", "Credit", "Energy", "Traffic", "Crop",
               "Fuel", "Rent", "Insurance", "Pension", "Water", "Carbon", "Freight", "Stock", "Bond", "Sales",
               "Market", "Budget", "Salary", "Import", "Export", "Harvest", "Parking", "Ticket", "Hotel", "Flight"]
_SYN_SUFFIX = ["Calc", "Forecast", "Estimator", "Index", "Lookup", "Score", "Tracker", "Analyzer", "Planner",
               "Meter", "Projector", "Auditor"]


def _synthetic(name: str, noun: str, kind: str) -> Tool:
    salt = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)

    def fn(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
        v = float(args["amount"]) * (0.05 + (salt % 997) / 400)
        return f"{float(args['amount']):g} -> {v:.2f}", v

    return Tool(name, f"{kind} the {noun} of an amount.", {"amount": {"type": "number"}}, fn,
                lambda r, g: {"amount": _pick(g, _scene_numbers(r.scene))})


def synthetic_distractors(n: int, seed: int = 0) -> list[Tool]:
    """`n` seeded synthetic distractors (TaxCalc, PayrollForecast, ...), each a plausible scene-derived number."""
    names = [p + s for p in _SYN_PREFIX for s in _SYN_SUFFIX]
    if n > len(names):
        raise ValueError(f"at most {len(names)} synthetic distractors; asked for {n}")
    rng = random.Random(f"tgb-synthetic:{seed}")
    chosen = rng.sample(names, n)
    kinds = ["Estimates", "Forecasts", "Computes", "Looks up", "Projects"]
    return [_synthetic(nm, re.sub(r"(?<!^)([A-Z])", r" \1", nm).lower(), rng.choice(kinds)) for nm in chosen]


@dataclass(frozen=True)
class Registry:
    """The global tool registry S in canonical order (authored tools first, then synthetic distractors)."""

    tools: tuple[Tool, ...]
    seed: int = 0

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"tool {name!r} is not in this {len(self)}-tool registry") from None

    @functools.cached_property
    def _by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}

    @functools.cached_property
    def _order(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.tools)

    def canonical(self, menu: Iterable[str]) -> list[str]:
        """The served tools in registry order (the paper's fixed canonical order of context lines)."""
        order = self._order
        unknown = [m for m in menu if m not in order]
        if unknown:
            raise KeyError(f"tools not in the registry: {unknown}")
        return sorted(set(menu), key=order.__getitem__)


def make_registry(size: int = 15, seed: int = 0) -> Registry:
    """15 authored tools, plus `size - 15` seeded synthetic distractors (F.1: 30/60/120/240)."""
    if size < len(AUTHORED):
        raise ValueError(f"a TGB registry has at least {len(AUTHORED)} tools; asked for {size}")
    return Registry(AUTHORED + tuple(synthetic_distractors(size - len(AUTHORED), seed)), seed)


# ------------------------------------------------------------------------------------------------ execution
def _chain_args(req: Request, tool: str, data: dict[str, Any]) -> dict[str, Any]:
    """Arguments of a chain step from the request and its producers' outputs (Unresolved when missing)."""
    f, sc = req.family, req.scene

    def need(producer: str) -> Any:
        return data.get(producer, Unresolved(f"{producer}_output"))

    if tool == "TableQuery":
        return {"table_id": sc["table"]["id"]}
    if tool == "SensorAPI":
        return {"sensor_id": sc["sensor"]["id"]}
    if tool == "CalendarAPI":
        return {"date": sc["calendar"]["date"]}
    if tool == "DocRetrieve":
        return {"query": req.question}
    if tool == "ExchangeRate":
        return {"base": sc["fx"]["base"], "quote": sc["fx"]["quote"]}
    if tool == "Translate":
        hits = need("DocRetrieve")
        if isinstance(hits, Unresolved):
            return {"text": hits}
        phrase = next((d["phrase"] for d in hits if d["kind"] == "cipher"), None)
        return {"text": phrase if phrase else Unresolved("cipher_phrase")}
    if tool == "Calculator":
        return {"expression": _calc_expression(req, data)}
    raise KeyError(f"{tool} is not a chain tool of {f}")


def _calc_expression(req: Request, data: dict[str, Any]) -> str:
    f = req.family
    if f == "compute_only":
        return req.params["expression"]
    if f in ("table_total", "table_filter"):
        rows = data.get("TableQuery")
        if rows is None:
            return "TableQuery_output"
        if f == "table_filter":
            rows = [r for r in rows if r["category"] == req.params["category"]]
        return " + ".join(f"{r['qty']}*{r['price']:.2f}" for r in rows)
    if f in ("sensor_mean", "sensor_convert"):
        xs = data.get("SensorAPI")
        if xs is None:
            return "SensorAPI_output"
        mean = f"({' + '.join(f'{x:.1f}' for x in xs)}) / 5"
        return mean if f == "sensor_mean" else f"{mean} * {req.params['factor']} + {req.params['offset']}"
    if f == "schedule_gap":
        ev = data.get("CalendarAPI")
        if ev is None:
            return "CalendarAPI_output"
        t = {e["title"]: e["time"] for e in ev}
        a, b = t[req.params["first"]], t[req.params["second"]]
        return f"({int(b[:2])}*60 + {int(b[3:])}) - ({int(a[:2])}*60 + {int(a[3:])})"
    if f == "doc_two_facts":
        hits = data.get("DocRetrieve")
        if hits is None:
            return "DocRetrieve_output"
        price = {d["brand"]: d["price"] for d in hits if d["kind"] == "price"}
        a, b = (price.get(req.params[k]) for k in ("first", "second"))
        a_s = f"{a:.2f}" if a is not None else "DocRetrieve_first"
        b_s = f"{b:.2f}" if b is not None else "DocRetrieve_second"
        return f"{a_s} {req.params['op']} {b_s}"
    if f == "fx_settle":
        hits, rate = data.get("DocRetrieve"), data.get("ExchangeRate")
        inv = next((d for d in hits or [] if d["kind"] == "invoice"), None)
        qty_price = f"{inv['qty']} * {inv['price']:.2f}" if inv else "DocRetrieve_output"
        return f"{qty_price} * {f'{rate:.4f}' if rate is not None else 'ExchangeRate_output'}"
    raise KeyError(f"Calculator is not on the chain of {f}")


def execute(req: Request, menu: Iterable[str], registry: Registry) -> dict[str, str]:
    """Run every served tool once (B.2): the chain in dependency order, the rest on generic arguments.

    Returns {tool: output text} in canonical order. Deterministic given the request and the menu.
    """
    served = registry.canonical(menu)
    scene = {**req.scene, "codebook": cipher_codebook(registry.seed)}
    chain = CHAINS[req.family]
    out: dict[str, str] = {}
    data: dict[str, Any] = {}
    for name in chain:
        if name not in served:
            continue
        try:
            text, value = registry[name].run(scene, _chain_args(req, name, data))
            if value is not None:
                data[name] = value
            out[name] = text
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    for name in served:
        if name in chain:
            continue
        out[name] = _off_chain(req, registry[name], scene)
    return {n: out[n] for n in served}


def _off_chain(req: Request, tool: Tool, scene: dict[str, Any]) -> str:
    """A tool off the family's chain on generic arguments, redrawn until it does not show the gold answer.

    Record tools cannot be redrawn into other records, so they keep their first draw (their rows may hold
    any number); every other tool (the distractors above all) never shows the gold value.
    """
    first = None
    for variant in range(_GUARD_TRIES):
        rng = random.Random(f"{req.id}:{tool.name}:{variant}")
        try:
            text, _ = tool.run(scene, tool.generic(req, rng))
        except Exception as e:
            text = f"{type(e).__name__}: {e}"
        first = text if first is None else first
        if not exposes_gold(text[:LINE_CAP], req.gold):
            return text
    if tool.name in RECORD_TOOLS:
        return first
    raise RuntimeError(f"{tool.name} shows the gold answer of {req.id} under every generic argument; "
                       "widen its generic arguments")


def tool_lines(outputs: dict[str, str]) -> list[str]:
    """The context lines `<Tool>: <output>`, one per served tool, each capped at 1,500 characters."""
    return [f"{name}: {text}"[:LINE_CAP] for name, text in outputs.items()]


def intervene(req: Request, menu: Iterable[str], registry: Registry, tool: str,
              mode: str = "reexecute") -> dict[str, str]:
    """Outputs with `tool`'s evidence removed (E.3): re-execute the chain without it, or drop only its line."""
    menu = registry.canonical(menu)
    if tool not in menu:
        raise KeyError(f"{tool} was not served on {req.id}")
    if mode == "reexecute":
        return execute(req, [m for m in menu if m != tool], registry)
    if mode == "evidence":
        return {k: v for k, v in execute(req, menu, registry).items() if k != tool}
    raise ValueError(f"deletion mode {mode!r} unknown; use reexecute or evidence")


def solve_without_tools(question: str) -> float | None:
    """What a tool-free solver can answer: the two control families, read from the question alone."""
    m = re.fullmatch(r"Compute (.+)\.", question)
    if m:
        return calculate(m[1])
    m = re.fullmatch(r"How many letters are in the word '(\w+)'\?", question)
    if m:
        return len(m[1])
    m = re.fullmatch(r"How many vowels are in the word '(\w+)'\?", question)
    if m:
        return sum(ch in "aeiou" for ch in m[1])
    m = re.fullmatch(r"What is the position of the letter '([a-z])' in the English alphabet\?", question)
    if m:
        return ord(m[1]) - 96
    return None
