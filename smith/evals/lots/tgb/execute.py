"""Serving a TGB request (B.2): every served tool runs once, the family's chain in dependency order and every
other served tool on generic arguments; removing a tool re-executes the chain (E.3)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from .arithmetic import exposes_gold
from .registry import Registry
from .requests import Request, cipher_codebook
from .tools import CHAINS, RECORD_TOOLS, Tool, Unresolved

LINE_CAP = 1500
_GUARD_TRIES = 32


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
