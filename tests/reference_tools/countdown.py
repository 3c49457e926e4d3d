import re
from fractions import Fraction


def solve(question: str) -> str:
    """Target-directed search over left-deep expressions ((a op b) op c) ...: pick the last operand, invert
    its operation on the target, and recurse on the remaining numbers (failures are memoised)."""
    first = question.split("\n")[0]
    m = re.search(r"Using all the numbers ([\d, ]+), create an expression that equals (\d+)", first)
    if m:
        numbers_text, target_text = m.groups()
    else:
        target_text, numbers_text = re.search(
            r"(?:make|Calculate) (\d+) using all of these numbers: ([\d, ]+)", first
        ).groups()
    numbers = [int(x) for x in re.findall(r"\d+", numbers_text)]
    failed: set[tuple] = set()

    def reach(nums: tuple[int, ...], target: Fraction) -> str | None:
        if len(nums) == 1:
            return str(nums[0]) if nums[0] == target else None
        key = (nums, target)
        if key in failed:
            return None
        for i, a in enumerate(nums):
            if a in nums[:i]:
                continue  # same value already tried as the last operand
            rest = nums[:i] + nums[i + 1 :]
            for need, fmt in ((target - a, "{} + {}"), (target + a, "{} - {}"), (target * a, "({})/{}")):
                found = reach(rest, need)
                if found:
                    return fmt.format(found, a)
            if a != 0:
                found = reach(rest, target / a)
                if found:
                    return f"({found})*{a}"
        failed.add(key)
        return None

    return reach(tuple(sorted(numbers)), Fraction(int(target_text))) or ""
