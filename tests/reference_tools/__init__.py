"""Hand-written reference tools, one `solve(question: str) -> str` per catalog category.

They prove that each category admits one reusable procedure that reads only the question text
(tests/test_tasks_reference.py grades them through the real sandbox). They live under tests/ so that no
prompt, training example or pool ever sees them. Standard library only: a tool runs in the sandbox.
"""
