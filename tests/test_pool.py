"""Issue 5: the tool pool: admission, eviction, de-duplication, distractors, persistence, export."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest

from smith.pool import PoolEntry, PoolFileError, ToolPool, menu_names
from smith.pool.export import export, load_openai_export, to_openai
from smith.pool.mcp_server import input_schema
from smith.toolspec import ToolSpec

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"name": "solve", "description": "d", "parameters": {"type": "object", "properties": {
    "question": {"type": "string"}}, "required": ["question"]}}


def entry(cat: str, body: str = "return question", r_eval: float = 0.5, r_judge: float | None = None,
          step: int = 0, name: str = "solve") -> PoolEntry:
    code = f"def {name}(question: str) -> str:\n    {body}\n"
    return PoolEntry(cat, ToolSpec(code, {**SCHEMA, "name": name, "description": f"tool for {cat}"}, name), r_eval,
                     r_judge, step)


def test_admission_needs_positive_eval_and_evicts_lowest_quality():
    pool = ToolPool(cap_per_category=2)
    assert not pool.admit(entry("gcd", r_eval=0.0))
    assert pool.admit(entry("gcd", "return '1'", r_eval=0.25))
    assert pool.admit(entry("gcd", "return '2'", r_eval=0.75))
    assert pool.admit(entry("gcd", "return '3'", r_eval=0.5))  # evicts the 0.25 tool
    assert [e.r_eval for e in pool.entries("gcd")] == [0.75, 0.5]
    assert not pool.admit(entry("gcd", "return '4'", r_eval=0.1))  # would be evicted at once
    assert len(pool) == 2


def test_duplicates_by_normalised_code_keep_the_better():
    pool = ToolPool()
    assert pool.admit(entry("lcm", "return question  # first", r_eval=0.5))
    same = PoolEntry("lcm", ToolSpec('def solve(question: str) -> str:\n    """doc"""\n    return question\n', SCHEMA,
                                     "solve"), 0.25)
    assert not pool.admit(same)
    better = PoolEntry("lcm", ToolSpec("def solve(question:str)->str:\n  return question", SCHEMA, "solve"), 0.9)
    assert pool.admit(better)
    assert [e.r_eval for e in pool.entries("lcm")] == [0.9]


def test_matching_and_distractors_from_other_groups_first():
    pool = ToolPool(groups={"gcd": "Arithmetic", "lcm": "Arithmetic", "knights_knaves": "Logic",
                            "word_ladder": "Games"})
    for cat in ["gcd", "lcm", "knights_knaves", "word_ladder"]:
        pool.admit(entry(cat))
    assert pool.matching("gcd").category == "gcd"
    assert pool.matching("nope") is None
    for seed in range(10):
        ds = pool.distractors("gcd", 2, random.Random(seed))
        assert {d.category for d in ds} == {"knights_knaves", "word_ladder"}
    assert {d.category for d in pool.distractors("gcd", 3, random.Random(0))} == {"knights_knaves", "word_ladder",
                                                                                   "lcm"}


def test_menu_keeps_names_and_suffixes_only_repeats():
    tools = [entry("gcd"), entry("lcm", name="lcm_of"), entry("knights_knaves"), entry("word_ladder", name="solve_2")]
    menu = menu_names(tools)
    assert list(menu) == ["solve", "lcm_of", "solve_2_2", "solve_2_3"]  # a suffix that collides is resolved
    assert menu["lcm_of"].category == "lcm" and menu["solve"].category == "gcd"
    assert [e.category for e in menu.values()] == ["gcd", "lcm", "knights_knaves", "word_ladder"]


def test_save_load_identical_and_atomic(tmp_path):
    pool = ToolPool(cap_per_category=3, groups={"gcd": "Arithmetic"})
    pool.admit(entry("gcd", r_eval=0.5, r_judge=0.8, step=3))
    pool.admit(entry("count_bits", "return str(bin(int(question)).count('1'))", r_eval=1.0))
    pool.save(tmp_path / "run")  # a directory: the pool file goes inside
    again = ToolPool.load(tmp_path / "run")
    assert again.to_json() == pool.to_json()
    assert not list((tmp_path / "run").glob(".*tmp"))


def test_corrupt_pool_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "tool_pool.json"
    bad.write_text('{"entries": [')
    with pytest.raises(PoolFileError, match=str(bad)):
        ToolPool.load(bad)
    with pytest.raises(FileNotFoundError, match="no tool pool"):
        ToolPool.load(tmp_path / "missing")


@pytest.mark.parametrize("change, message", [
    (lambda d: d["entries"][0].update(r_eval=None), r"entry 0: r_eval is 'None', want a number in \[0, 1\]"),
    (lambda d: d["entries"][0].update(r_eval="0.5"), r"entry 0: r_eval .* want a number"),
    (lambda d: d["entries"][0].update(r_eval=2.0), r"entry 0: r_eval .* want a number in \[0, 1\]"),
    (lambda d: d["entries"][0].update(code=["print(1)"]), r"entry 0: code .* want a string"),
    (lambda d: d["entries"][0].update(schema="x"), r"entry 0: schema .* want an object"),
    (lambda d: d["entries"][0].update(extra=1), r"entry 0 has unknown fields \['extra'\]"),
    (lambda d: d["entries"][0].pop("code"), r"entry 0 lacks fields \['code'\]"),
    (lambda d: d.update(format_version=999), r"format_version 999; this smith reads 1"),
    (lambda d: d.update(cap_per_category=1e400), r"cap_per_category inf is not an integer >= 1"),
    (lambda d: d.update(cap_per_category=True), r"cap_per_category True"),
    (lambda d: d.update(entries={}), r"entries is not a list"),
    # issue 44 (10): an invalid OpenAI schema used to be exported as is and crash serve-pool
    (lambda d: d["entries"][0]["schema"].update(parameters="x"), r"entry 0: schema: schema 'parameters' must be"),
    (lambda d: d["entries"][0]["schema"].update(name="not a name"), r"entry 0: schema: schema 'name' must be"),
])
def test_a_pool_file_with_bad_fields_is_a_one_line_error(change, message, tmp_path):
    """Wrong types, out-of-range values, an unknown version: refused on load, naming the field (they used to
    load silently or fail later with a traceback)."""
    pool = ToolPool()
    pool.admit(entry("gcd", r_eval=0.5))
    path = pool.save(tmp_path / "tool_pool.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(PoolFileError, match=message):
        ToolPool.load(path)
    path.write_text('{"entries": ' + "[" * 100_000 + "]" * 100_000 + "}")  # nested too deep for the parser
    with pytest.raises(PoolFileError, match="corrupt"):
        ToolPool.load(path)


def test_pool_files_written_before_entries_held_a_toolspec_load_and_save_unchanged(tmp_path):
    """The file keeps one flat row per entry: the fixture pools (written by an older smith) save back byte for
    byte; a hand-written row may wrap its schema, omit `parameters` and leave out the optional fields."""
    fixtures = sorted((ROOT / "tests" / "fixtures" / "report").glob("run-tiny/checkpoint-*/tool_pool.json"))
    assert fixtures
    for path in fixtures:
        assert ToolPool.load(path).save(tmp_path / "again.json").read_bytes() == path.read_bytes()
    code = "def solve(question: str) -> str:\n    return question\n"
    rows = [{"category": "a", "code": code, "schema": {"type": "function", "function": SCHEMA},
             "function_name": "solve", "r_eval": 0.5},
            {"category": "b", "code": code, "schema": {"name": "solve", "description": "no parameters"},
             "function_name": "solve", "r_eval": 0.25}]
    path = tmp_path / "hand.json"
    path.write_text(json.dumps({"format_version": 1, "cap_per_category": 2, "entries": rows}))
    pool = ToolPool.load(path)
    a, b = pool.matching("a"), pool.matching("b")
    assert isinstance(a.tool, ToolSpec) and a.tool.schema == SCHEMA and (a.r_judge, a.step, a.meta) == (None, 0, {})
    assert pool.to_json()["entries"][0] == {**rows[0], "schema": SCHEMA, "r_judge": None, "step": 0,
                                            "source_run": "", "meta": {}}
    assert to_openai(pool)[1]["function"] == {"name": "solve_2", "description": "no parameters",
                                              "parameters": {"type": "object", "properties": {}}}
    assert b.tool.schema == rows[1]["schema"]  # offering it as taking no arguments does not rewrite the file


def test_load_from_run_dir_picks_newest_checkpoint(tmp_path):
    for step, n in [(2, 1), (10, 2)]:
        pool = ToolPool()
        for i in range(n):
            pool.admit(entry(f"c{i}"))
        pool.save(tmp_path / f"checkpoint-{step}" / "tool_pool.json")
    assert len(ToolPool.load(tmp_path)) == 2


# OpenAI's function-tool format (platform.openai.com/docs/api-reference/chat/create, `tools`), written out
# here so the export is checked against the documented shape, not against smith's own idea of it
OPENAI_TOOL = {
    "type": "object",
    "required": ["type", "function"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                "description": {"type": "string"},
                "parameters": {"type": "object"},
                "strict": {"type": ["boolean", "null"]},
            },
        },
    },
}


def test_openai_export_is_strict_tools_plus_a_sidecar(tmp_path):
    """`--format openai` writes nothing but {type, function} per tool (strict endpoints reject other keys);
    code, callable, category and rewards go to `<out>.smith.json`, and the two rebuild the pool."""
    from jsonschema import Draft202012Validator

    from smith.cli import main

    pool = ToolPool(cap_per_category=3, groups={"gcd": "Arithmetic"})
    pool.admit(entry("gcd", "return 'g'", r_eval=0.5, r_judge=0.8, step=4))
    pool.admit(entry("lcm", "return 'l'", r_eval=0.75))  # same function name: exported under a distinct one
    long_name = "ŝolve_" + "x" * 70  # a Python identifier OpenAI would refuse as a name
    pool.admit(entry("maze", "return 'm'", r_eval=1.0, name=long_name))
    returns = {**SCHEMA, "returns": {"type": "string"}}  # a key OpenAI does not know
    pool.admit(PoolEntry("ab", ToolSpec("def solve(question: str) -> str:\n    return 'a'\n", returns, "solve"), 0.25))
    main(["export-pool", str(pool.save(tmp_path / "run")), "--format", "openai", "--out", str(tmp_path / "tools.json")])
    tools = json.loads((tmp_path / "tools.json").read_text())
    for tool in tools:
        Draft202012Validator(OPENAI_TOOL).validate(tool)
    names = [t["function"]["name"] for t in tools]
    assert names == ["solve", "solve_2", "solve_3", "_olve_" + "x" * 42] and len(set(names)) == 4
    meta = json.loads((tmp_path / "tools.json.smith.json").read_text())
    assert sorted(meta["tools"]) == sorted(names)
    assert meta["tools"]["solve_2"] == {"callable": "solve", "category": "gcd",
                                        "code": entry("gcd", "return 'g'").tool.code, "r_eval": 0.5, "r_judge": 0.8,
                                        "step": 4, "source_run": "", "meta": {}}
    assert meta["tools"][names[3]]["callable"] == long_name
    again = load_openai_export(tmp_path / "tools.json")
    assert again.to_json()["entries"] == [{**e, "schema": {k: v for k, v in e["schema"].items() if k != "returns"}}
                                          for e in pool.to_json()["entries"]]
    assert (again.cap, again.groups) == (3, {"gcd": "Arithmetic"})
    (tmp_path / "tools.json.smith.json").rename(tmp_path / "elsewhere.json")
    with pytest.raises(FileNotFoundError, match=r"no smith sidecar tools.json.smith.json"):
        load_openai_export(tmp_path / "tools.json")


def test_jsonl_and_python_exports(tmp_path):
    pool = ToolPool()
    pool.admit(entry("gcd", "return 'g'", r_eval=0.5))
    pool.admit(entry("lcm", "return 'l'", r_eval=0.75))
    lines = export(pool, "jsonl", tmp_path / "tools.jsonl").read_text().splitlines()
    assert [json.loads(x)["category"] for x in lines] == ["gcd", "lcm"]
    mod_path = export(pool, "python", tmp_path / "tools_mod.py")
    spec = importlib.util.spec_from_file_location("tools_mod", mod_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert sorted(fn("x") for fn, _ in mod.TOOLS.values()) == ["g", "l"]
    assert all(schema["type"] == "function" for _, schema in mod.TOOLS.values())
    with pytest.raises(ValueError, match="unknown export format"):
        export(pool, "yaml", tmp_path / "x")


def test_serve_pool_over_mcp_stdio(tmp_path):
    """`smith serve-pool` lists the pooled tools and runs calls in the strict sandbox, via the mcp client."""
    import sys

    import anyio
    from mcp import Client, StdioServerParameters

    pool = ToolPool()
    pool.admit(entry("spell_backward", "return question.split(':')[-1].strip()[::-1]", r_eval=1.0))
    pool.admit(entry("lcm", "raise ValueError('broken tool')", r_eval=0.5))
    path = pool.save(tmp_path / "pool.json")
    server = StdioServerParameters(command=sys.executable, args=["-m", "smith.cli", "serve-pool", str(path)])

    async def session() -> tuple:
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
            ok = await client.call_tool(listed[1].name, {"question": "Spell this word backward: smith"})
            bad = await client.call_tool(listed[0].name, {"question": "x"})
            missing = await client.call_tool("nope", {})
            invalid = [await client.call_tool(listed[1].name, args)
                       for args in ({}, {"question": 12}, {"question": "x", "verbose": True})]
            return listed, ok, bad, missing, invalid

    listed, ok, bad, missing, invalid = anyio.run(session)
    assert sorted(t.name for t in listed) == ["solve", "solve_2"]
    assert {t.description for t in listed} == {"tool for lcm", "tool for spell_backward"}
    assert listed[0].input_schema["required"] == ["question"]
    assert not ok.is_error and ok.content[0].text == "htims"
    assert bad.is_error and "ValueError" in bad.content[0].text and "broken tool" in bad.content[0].text
    assert missing.is_error and "unknown tool" in missing.content[0].text
    # arguments are checked against the tool's schema before it runs: the error names the argument
    assert all(r.is_error for r in invalid)
    assert [r.content[0].text for r in invalid] == [
        "invalid arguments for solve_2: 'question' is a required property",
        "invalid arguments for solve_2: argument 'question': 12 is not of type 'string'",
        "invalid arguments for solve_2: Additional properties are not allowed ('verbose' was unexpected)",
    ]
    assert listed[1].input_schema["additionalProperties"] is False
    assert input_schema({"type": "object", "additionalProperties": True})["additionalProperties"] is True
    assert [t.name for t in listed] == [t["function"]["name"] for t in to_openai(pool)]  # the export's names


def test_serve_pool_retrieve_exposes_search(tmp_path):
    import sys

    import anyio
    from mcp import Client, StdioServerParameters

    pool = ToolPool()
    pool.admit(entry("spell_backward", "return question[::-1]", r_eval=1.0))
    lcm = {**SCHEMA, "name": "lcm_tool", "description": "least common multiple of integers"}
    code = "def lcm_tool(question: str) -> str:\n    return '6'\n"
    pool.admit(PoolEntry("lcm", ToolSpec(code, lcm, "lcm_tool"), 1.0))
    path = pool.save(tmp_path / "pool.json")
    server = StdioServerParameters(command=sys.executable, args=["-m", "smith.cli", "serve-pool", str(path),
                                                                 "--retrieve", "--scorer", "bm25"])

    async def session() -> tuple:
        async with Client(server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            hit = await client.call_tool("search_tools", {"query": "least common multiple", "k": 1})
            bad = await client.call_tool("search_tools", {"query": "x", "k": 99})
            return names, hit, bad

    names, hit, bad = anyio.run(session)
    assert "search_tools" in names and "lcm_tool" in names
    assert json.loads(hit.content[0].text) == [{"name": "lcm_tool", "description": "least common multiple of integers"}]
    assert bad.is_error and bad.content[0].text == ("invalid arguments for search_tools: argument 'k': 99 is "
                                                    "greater than the maximum of 10")
