"""Serving a fixed model on TGB requests under a tool menu, with a resumable trace log (003, section 2, B.2).

The context h_x is the chat prompt: the documentation of the served tools (system), then the request and
one `<Tool>: <output>` line per served tool in canonical order (user). The agent's greedy reply is the
frozen answer y_x that LOTS later scores. Serving is deterministic, so a (request, registry, menu) triple
is served once and cached in `serves.jsonl`; every method and budget that asks for it again reads it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from smith.evals.common import EpisodeLog
from smith.evals.lots import tgb
from smith.models.base import ChatBackend, Message, SamplingParams
from smith.models.chat_format import format_of

SYSTEM = "Answer the request. The tools below were run for it; their outputs follow it. Reply with one number."
ROUTER = ("Choose the tools needed to answer the request. Reply with the chosen tool names separated by commas, "
          "or 'none' if no tool is needed.")


def build_messages(req: tgb.Request, registry: tgb.Registry, menu: Sequence[str],
                   outputs: dict[str, str]) -> list[Message]:
    """h_x for a served menu; `outputs` may be an intervened execution (documentation stays the menu's)."""
    docs = "\n".join(f"- {n}: {registry[n].description}" for n in registry.canonical(menu)) or "(no tools)"
    lines = tgb.tool_lines(outputs)
    user = f"Request: {req.question}\n\nTool outputs:\n" + ("\n".join(lines) if lines else "(none)")
    return [{"role": "system", "content": f"{SYSTEM}\n\nTools:\n{docs}"}, {"role": "user", "content": user}]


@dataclass
class Served:
    """One request as the agent sees it under a menu."""

    request: tgb.Request
    menu: list[str]
    outputs: dict[str, str]
    messages: list[Message]


class Agent(Protocol):
    """What the suite needs from a model: answers under a menu, and per-request tool routing."""

    name: str

    def answer(self, items: list[Served]) -> list[tuple[str, int]]: ...  # (reply, prompt tokens; 0 = unknown)

    def route(self, reqs: list[tgb.Request], registry: tgb.Registry) -> list[tuple[list[str], int]]: ...


class ChatAgent:
    """A ChatBackend served greedily (the paper's serving setting)."""

    def __init__(self, backend: ChatBackend, max_new_tokens: int = 64) -> None:
        self.backend = backend
        self.name = backend.name
        self.params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0)

    def answer(self, items: list[Served]) -> list[tuple[str, int]]:
        """Each reply as its format reads it: what the model said, its reasoning left out."""
        gens = self.backend.chat([it.messages for it in items], None, self.params)
        fmt = format_of(self.backend)
        return [(fmt.parse(g.text).content, g.prompt_tokens) for g in gens]

    def route(self, reqs: list[tgb.Request], registry: tgb.Registry) -> list[tuple[list[str], int]]:
        """LLM as router (B.1): the serving model picks tools from their descriptions, once per request."""
        docs = "\n".join(f"- {t.doc()}" for t in registry.tools)
        convs = [[{"role": "system", "content": f"{ROUTER}\n\nTools:\n{docs}"},
                  {"role": "user", "content": f"Request: {r.question}"}] for r in reqs]
        gens = self.backend.chat(convs, None, SamplingParams(max_new_tokens=128, temperature=0.0))
        fmt = format_of(self.backend)  # a tool named only in the reasoning is not routed
        return [(parse_route(fmt.parse(g.text).content, registry), g.prompt_tokens) for g in gens]


def parse_route(text: str, registry: tgb.Registry) -> list[str]:
    """Tool names the router's reply mentions, in canonical order."""
    found = [n for n in registry.names if re.search(rf"\b{re.escape(n)}\b", text)]
    return registry.canonical(found)


class GoldAgent:
    """`scripted:gold`, a harness check: answers with the output of the family's gold chain.

    It reads the last chain tool's line; a family whose chain is empty or optional (the controls) it
    answers from the question alone. As a router it picks the gold chain.
    """

    name = "scripted:gold"

    def answer(self, items: list[Served]) -> list[tuple[str, int]]:
        out = []
        for it in items:
            chain = tgb.CHAINS[it.request.family]
            text = "I cannot determine this from the available tools."
            if chain and chain[-1] in it.outputs and tgb.numbers(it.outputs[chain[-1]]) \
                    and not re.match(r"\w+Error:", it.outputs[chain[-1]]):
                text = tgb.fmt(tgb.numbers(it.outputs[chain[-1]])[-1])
            elif it.request.family in tgb.CONTROL_FAMILIES:
                solved = tgb.solve_without_tools(it.request.question)
                text = text if solved is None else tgb.fmt(solved)
            out.append((text, 0))
        return out

    def route(self, reqs: list[tgb.Request], registry: tgb.Registry) -> list[tuple[list[str], int]]:
        return [(list(tgb.CHAINS[r.family]), 0) for r in reqs]


def menu_key(req: tgb.Request, registry: tgb.Registry, menu: Sequence[str]) -> str:
    digest = hashlib.sha1(",".join(registry.canonical(menu)).encode()).hexdigest()[:16]
    return f"{req.id}|{len(registry)}|{digest}"


class Server:
    """Serves (request, menu) pairs once each; answers, correctness and prompt tokens live in serves.jsonl."""

    def __init__(self, agent: Agent, registry: tgb.Registry, log_path: str | Path,
                 count_tokens: Callable[[list[Message]], int], batch_size: int = 32) -> None:
        self.agent = agent
        self.registry = registry
        self.log = EpisodeLog(log_path)
        self.count_tokens = count_tokens
        self.batch_size = batch_size

    def served(self, req: tgb.Request, menu: Sequence[str]) -> Served:
        menu = self.registry.canonical(menu)
        outputs = tgb.execute(req, menu, self.registry)
        return Served(req, menu, outputs, build_messages(req, self.registry, menu, outputs))

    def serve(self, reqs: Sequence[tgb.Request], menus: Sequence[Sequence[str]], desc: str = "serve") \
            -> list[dict[str, Any]]:
        """One trace row per request (its answer, correctness, prompt tokens), serving only what is missing."""
        keys = [menu_key(r, self.registry, m) for r, m in zip(reqs, menus, strict=True)]
        todo = list({k: (r, m) for k, r, m in zip(keys, reqs, menus, strict=True) if k not in self.log}.items())
        for i in tqdm(range(0, len(todo), self.batch_size), desc=desc, disable=not todo, leave=False):
            chunk = todo[i:i + self.batch_size]
            items = [self.served(r, m) for _, (r, m) in chunk]
            for (key, (r, _)), it, (text, ptok) in zip(chunk, items, self.agent.answer(items), strict=True):
                self.log.add({"key": key, "request": r.id, "family": r.family, "split": r.split,
                              "registry": len(self.registry), "menu": it.menu, "answer": text,
                              "gold": r.gold, "correct": tgb.grade(text, r.gold),
                              "prompt_tokens": ptok or self.count_tokens(it.messages)})
        return [self.log.rows[k] for k in keys]

    def accuracy(self, reqs: Sequence[tgb.Request], menu: Sequence[str], desc: str = "serve") -> float:
        rows = self.serve(reqs, [menu] * len(reqs), desc)
        return sum(r["correct"] for r in rows) / max(1, len(rows))
