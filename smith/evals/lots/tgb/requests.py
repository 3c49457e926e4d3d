"""TGB's requests (Appendix B.1): a seeded hidden scene (a table, a sensor series, a calendar, a small
document corpus) per request, the question of its family and the gold value computed from the scene."""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .arithmetic import calculate

FAMILIES = ("table_total", "table_filter", "sensor_mean", "sensor_convert", "schedule_gap",
            "doc_two_facts", "translate_fact", "fx_settle", "compute_only", "no_tool")
CONTROL_FAMILIES = ("compute_only", "no_tool")
N_PER_FAMILY = 400
N_FIT = 80  # the first 80 requests of a family fit its space; the other 320 evaluate it (section 4.1)
_ITEMS = ["bolt", "hinge", "bracket", "lamp", "kettle", "stapler", "folder", "hose", "trowel", "cable", "valve",
          "mug", "drill bit", "notebook", "planter", "ladle", "router", "marker", "clamp", "sieve"]
_CATEGORIES = ["hardware", "office", "garden", "kitchen"]
_EVENTS = ["standup", "design review", "client call", "lunch", "budget sync", "code review", "1:1", "demo",
           "planning", "retro", "interview", "training"]
_BRANDS = ["Orion", "Vega", "Lyra", "Altair", "Rigel", "Deneb", "Mira", "Castor", "Pollux", "Sirius"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD"]
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
    base, quote = rng.sample(CURRENCIES[:5], 2)
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
