import re


def solve(question: str) -> str:
    n = int(re.search(r"factorization of (\d+)", question).group(1))
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return " × ".join(map(str, factors))
