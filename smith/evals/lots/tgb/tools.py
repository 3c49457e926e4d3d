"""TGB's tools (Table 4): the seven chain tools, the eight executable distractors and the seeded synthetic
distractors of larger registries, each a documented function over the hidden scene."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .arithmetic import calculate, fmt
from .requests import CURRENCIES, Request

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


def _record(scene: dict[str, Any], source: str, wanted: str) -> dict[str, Any]:
    """The scene's table or sensor when `wanted` is its id (KeyError otherwise, as a lookup of an unknown id)."""
    record = scene[source]
    if wanted != record["id"]:
        raise KeyError(f"{source} {wanted!r} not found")
    return record


def _table_query(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    t = _record(scene, "table", args["table_id"])
    rows = "; ".join(f"{r['item']} ({r['category']}) {r['qty']} x {r['price']:.2f}" for r in t["rows"])
    return f"{t['id']}: {rows}", t["rows"]


def _sensor_api(scene: dict[str, Any], args: dict[str, Any]) -> tuple[str, Any]:
    s = _record(scene, "sensor", args["sensor_id"])
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
         lambda r, g: dict(zip(("base", "quote"), g.sample(CURRENCIES, 2), strict=True))),
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
                                          **dict(zip(("from_currency", "to_currency"), g.sample(CURRENCIES, 2),
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
