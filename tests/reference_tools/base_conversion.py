import re

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_NAMED = {"binary": 2, "hexadecimal": 16}
_BASE = r"(?:base-(\d+)|(binary|hexadecimal))"


def _base(number: str | None, name: str | None) -> int:
    return int(number) if number else _NAMED[name]


def solve(question: str) -> str:
    m = re.search(rf"convert the {_BASE} number (\S+) to {_BASE}", question)
    src, dst = _base(m.group(1), m.group(2)), _base(m.group(4), m.group(5))
    value = int(m.group(3), src)
    out = ""
    while True:
        value, r = divmod(value, dst)
        out = _DIGITS[r] + out
        if value == 0:
            return out
