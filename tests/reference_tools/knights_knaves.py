import itertools
import re

_TEMPLATES = [
    "{name} said that {content}.",
    "{name} told you that {content}.",
    '{name} said, "{content}."',
    '{name} stated, "{content}".',
    'According to {name}, "{content}".',
    'In {name}\'s words: "{content}".',
    '{name} remarked, "{content}".',
    '"{content}," {name} declared.',
    '{name} was heard saying, "{content}".',
    "{name} expressed that {content}.",
    '"{content}" - {name}.',
    'As {name} put it, "{content}".',
    '{name} asserted: "{content}".',
    '"{content}," {name} mentioned.',
    '{name} commented, "{content}".',
    'In a statement by {name}: "{content}".',
    '{name} noted, "{content}".',
    '"{content}," {name} claimed.',
]


def _split_top(text: str, sep: str) -> list[str]:
    """Split on `sep` outside parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _strip(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and len(_split_top(text[1:-1], ")")) == 1:
        inner, depth = text[1:-1], 0
        for ch in inner:
            depth += ch == "("
            depth -= ch == ")"
            if depth < 0:
                return text
        text = inner.strip()
    return text


def _parse(text: str, names: list[str], knight: str, knave: str):
    text = _strip(text)
    for sep, op in ((" if and only if ", "iff"), (" or ", "or"), (" and ", "and")):
        parts = _split_top(text, sep)
        if len(parts) > 1:
            subs = [_parse(p, names, knight, knave) for p in parts]
            if op == "iff":
                return lambda a, s=subs: s[0](a) == s[1](a)
            if op == "or":
                return lambda a, s=subs: any(f(a) for f in s)
            return lambda a, s=subs: all(f(a) for f in s)
    if text.startswith("if ") and " then " in text:
        parts = _split_top(text[3:], " then ")
        ante, cons = _parse(parts[0], names, knight, knave), _parse(" then ".join(parts[1:]), names, knight, knave)
        return lambda a: (not ante(a)) or cons(a)
    if text.startswith("it is not the case that "):
        inner = _parse(text[len("it is not the case that ") :], names, knight, knave)
        return lambda a: not inner(a)
    m = re.fullmatch(r"(\w+) is (?:a|an) (\w+)", text)
    who, role = names.index(m.group(1)), m.group(2)
    return (lambda a: a[who]) if role == knight else (lambda a: not a[who])


def solve(question: str) -> str:
    knight, knave = re.search(r"inhabited only by (\w+)s and (\w+)s\.", question).groups()
    names_text = re.search(r"You meet \d+ inhabitants: (.*?)\.", question).group(1)
    names = [n.strip() for n in re.split(r",\s*(?:and\s+)?|\s+and\s+", names_text) if n.strip()]
    body = question.split(names_text + ".", 1)[1].split(" So who is")[0]
    alt = "|".join(names)
    patterns = []
    for t in _TEMPLATES:
        p = (
            re.escape(t)
            .replace(re.escape("{name}"), f"(?P<name>{alt})")
            .replace(re.escape("{content}"), r'(?P<content>[^".]+?)')
        )
        patterns.append(p)
    statements = {}
    for sentence in re.finditer(r"\s*(.+?(?:\.\"|\"\.|\.))(?=\s|$)", body):
        s = sentence.group(1)
        for p in patterns:
            m = re.fullmatch(p, s)
            if m:
                statements[m.group("name")] = _parse(m.group("content"), names, knight, knave)
                break
    for assignment in itertools.product([True, False], repeat=len(names)):
        if all(statements[n](assignment) == assignment[i] for i, n in enumerate(names)):
            roles = [f"{n} is a {knight if v else knave}" for n, v in zip(names, assignment, strict=True)]
            return ", ".join(roles[:-1]) + ", and " + roles[-1]
    return ""
