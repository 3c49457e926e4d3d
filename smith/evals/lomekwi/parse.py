"""The parser of agent text (Appendix A.1): which line of a reply acts and how its arguments are read, in the
released code's reading (the default, it produced the published logs) and in smith's stricter one."""

from __future__ import annotations

import re

VERBS = ("examine", "combine", "use", "pickup")
V1_VERBS = ("examine", "combine", "use")
PARSERS = ("upstream", "smith")
ARTICLES = frozenset({"a", "an", "the"})
FILLERS = frozenset({"with", "to", "on", "and"})

_ACT = re.compile(r"^>?\s*(examine|combine|use|pickup)\b[\s:]*(.*)$", re.IGNORECASE)  # on the stripped line
# Separators: runs of whitespace, ',' and '+', and the fillers with/to/on/and as whole words. The released
# parser matches the fillers in lower case only ("use x ON y" keeps "on" as an argument); smith's in any case.
_SPLIT_UPSTREAM = re.compile(r"[+,\s]+|\b(?:with|to|on|and)\b")
_SPLIT_SMITH = re.compile(r"[+,\s]+|\b(?:with|to|on|and)\b", re.IGNORECASE)
_PUNCT = "`'\"*.,;:!?()[]{}<>"
_ARITY = {"pickup": 0, "examine": 1, "combine": 2, "use": 2}


def _clean(tok: str) -> str:
    return tok.strip().strip(_PUNCT).lower()


def _arguments(rest: str, parser: str, labels: frozenset[str]) -> list[str]:
    """The argument tokens of one action line, lower-cased, under either reading."""
    if parser == "upstream":
        return [t for t in (x.strip().lower() for x in _SPLIT_UPSTREAM.split(rest.strip())) if t]
    if parser == "smith":
        toks = [t for t in (_clean(x) for x in _SPLIT_SMITH.split(rest)) if t]
        return [t for t in toks if t not in ARTICLES or t in labels]
    raise ValueError(f"unknown parser {parser!r}; known: {', '.join(PARSERS)}")


def parse_action(line: str, labels: frozenset[str] = frozenset(), parser: str = "upstream",
                 verbs: tuple[str, ...] = VERBS) -> tuple[str, ...] | None:
    """One line -> ("examine", x) | ("combine", a, b) | ("use", a, b) | ("pickup",) | None.

    Both readings: the verb case-insensitive at the start of the line (a leading '>' tolerated), arguments
    lower-cased and split on whitespace, ',' and '+' and the fillers with/to/on/and; extra arguments are
    ignored, missing ones make the line unparseable. `verbs` limits the verbs (the v1 world has no pickup).

    parser="upstream" reads a line exactly as the released code that produced the published logs: fillers
    split only in lower case, and nothing else is removed ("examine the t_7" acts on `the`, "examine t."
    on `t.`). parser="smith" is the paper's text (Appendix A.1): fillers in any case, surrounding
    punctuation and leading articles dropped, except an article that is a label of this world (the letter
    scheme can draw 'a'; pass the world's labels, lower-cased, as `labels`).
    """
    m = _ACT.match(line.strip())
    if not m:
        return None
    verb = m.group(1).lower()  # the case-insensitive match also admits e.g. the long s; lower() settles it
    if verb not in verbs:
        return None
    toks = _arguments(m.group(2), parser, labels)
    if len(toks) < _ARITY[verb]:
        return None
    return (verb, *toks[: _ARITY[verb]])


def extract_action(text: str, labels: frozenset[str] = frozenset(), parser: str = "upstream",
                   verbs: tuple[str, ...] = VERBS) -> tuple[str, ...] | None:
    """The first parseable line of a reply acts; the rest of the reply is ignored."""
    for line in text.splitlines():
        act = parse_action(line, labels, parser, verbs)
        if act:
            return act
    return None
