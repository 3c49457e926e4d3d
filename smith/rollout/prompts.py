"""Prompt texts of the two SMITH tasks (paper: "Task 1 Build: write the tool", "Task 2 Use: call the tool")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BUILD_SYSTEM = (
    "You write reusable Python tools. A tool is one Python function plus an OpenAI function schema that "
    "describes how to call it."
)

BUILD_USER = """Here are {n} example questions of one task, with their answers:

{examples}

Infer the general procedure behind them and write ONE reusable Python tool that solves any question of this task, \
including harder ones (larger numbers, longer inputs). The function takes the question text and returns the answer \
as a string, formatted exactly like the answers above. Use only the Python standard library.

Reply with exactly one ```python block (the function, with any imports and helpers) and exactly one ```json block \
(its OpenAI function schema: {{"name": ..., "description": ..., "parameters": {{"type": "object", \
"properties": ..., "required": [...]}}}}). The schema's name must be the function's name and its parameters must \
match the function's signature. Describe in the description which questions the tool answers."""

USE_SYSTEM = (
    "You answer questions with the help of tools. Call the tool that fits the question, read its result, then "
    "reply with only the final answer, exactly in the format the question asks for."
)

USE_USER = "{question}"

INNER_BUILD_DONE = (
    "Your tool is now available as `{name}`. Use the available tools to answer this question, then reply with only "
    "the final answer:\n\n{question}"
)


def format_examples(examples: Sequence[Any]) -> str:
    return "\n\n".join(f"Question: {ex.question}\nAnswer: {ex.answer}" for ex in examples)


def build_messages(examples: Sequence[Any]) -> list[dict[str, str]]:
    """Build prompt: N easy question/answer pairs of one category (answers shown; no metadata ever)."""
    return [
        {"role": "system", "content": BUILD_SYSTEM},
        {"role": "user", "content": BUILD_USER.format(n=len(examples), examples=format_examples(examples))},
    ]


def use_messages(question: str) -> list[dict[str, str]]:
    """Use prompt: the target question; the pool entry's tools travel in the chat template's tool list."""
    return [{"role": "system", "content": USE_SYSTEM}, {"role": "user", "content": USE_USER.format(question=question)}]


def inner_use_messages(name: str, question: str) -> list[dict[str, str]]:
    """The use prompt that follows an inner build: the new tool's callable name and the question. Its tools travel
    in the chat template's tool list, as in every use prompt (`smith.models.chat_format.ChatFormat.follow_up`)."""
    return [{"role": "system", "content": USE_SYSTEM},
            {"role": "user", "content": INNER_BUILD_DONE.format(name=name, question=question)}]
