import math
import re

# Relative frequencies of letters in English text (percent, A..Z).
_FREQ = [
    8.2,
    1.5,
    2.8,
    4.3,
    12.7,
    2.2,
    2.0,
    6.1,
    7.0,
    0.15,
    0.77,
    4.0,
    2.4,
    6.7,
    7.5,
    1.9,
    0.095,
    6.0,
    6.3,
    9.1,
    2.8,
    0.98,
    2.4,
    0.15,
    2.0,
    0.074,
]
_COMMON = {
    "THE",
    "AND",
    "OF",
    "TO",
    "IN",
    "IS",
    "IT",
    "THAT",
    "A",
    "I",
    "YOU",
    "HE",
    "WAS",
    "FOR",
    "ON",
    "ARE",
    "AS",
    "WITH",
    "HIS",
    "THEY",
    "AT",
    "BE",
    "THIS",
    "HAVE",
    "FROM",
    "OR",
    "ONE",
    "HAD",
    "BY",
    "NOT",
    "BUT",
}


def _shift(text: str, k: int) -> str:
    return "".join(chr((ord(c) - 65 - k) % 26 + 65) if "A" <= c <= "Z" else c for c in text)


def _score(text: str) -> float:
    """Log-likelihood of the letters under English frequencies, plus a bonus per common word."""
    ll = sum(math.log(_FREQ[ord(c) - 65]) for c in text if "A" <= c <= "Z")
    return ll + 5.0 * sum(w in _COMMON for w in text.split())


def solve(question: str) -> str:
    cipher = re.search(r"cipher text: (.*?)\. Provide only", question, re.S).group(1)
    return max((_shift(cipher, k) for k in range(26)), key=_score)
