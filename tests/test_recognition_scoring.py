"""Recognition MCP, pure parts: division, budget, labels, prompts, counterfactual scoring, bootstrap, the
importer on real rows, the pilot table."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from smith.evals.common import metric
from smith.evals.recognition_mcp.division import check_answer, long_division, parse_problem
from smith.evals.recognition_mcp.host import (
    CONDITIONS,
    SYSTEM_PROMPT,
    SYSTEM_PROMPT_FREE,
    budget,
    plain_names,
    relabel,
    relabel_seed,
    system_prompt,
    task_prompt,
    tool_names,
)
from smith.evals.recognition_mcp.importer import export_row, import_logs, import_row
from smith.evals.recognition_mcp.report import family_and_size, pilot_metrics, pilot_report
from smith.evals.recognition_mcp.scoring import rollout_counts, score_rollout, summarize
from smith.evals.recognition_mcp.sweep import plan

FIXTURES = Path(__file__).parent / "fixtures" / "recognition_mcp"
RELEASED = FIXTURES / "qwen35_v2"
RELEASE_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "lomekwi_release" / "runs" / "oracle"


def released_rows() -> list[dict]:
    """Every fixture row: Qwen3.5, Qwen2.5 and Qwen3 tool-prior rollouts."""
    return [json.loads(line) for p in sorted(FIXTURES.rglob("episodes.jsonl")) for line in p.read_text().splitlines()]


# --- division -------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", range(2, 17))
def test_digit_counts(d):
    for seed in range(5):
        p = long_division(d, seed)
        assert len(str(p.dividend)) == d and len(str(p.divisor)) == d // 2
        assert p.quotient * p.divisor + p.remainder == p.dividend and 0 <= p.remainder < p.divisor


def test_seeded_and_regenerates_the_released_problems():
    assert long_division(12, 3) == long_division(12, 3)
    assert long_division(12, 3) != long_division(12, 4)
    for row in released_rows():  # rep r is seed r: the paper's problems come back exactly
        p = long_division(row["difficulty"], row["seed"])
        assert (p.text, p.true_answer) == (row["problem"], row["true_answer"])
        assert parse_problem(row["problem"]) == p


def test_checker_first_two_integers():
    q, r = 18052, 4830
    assert check_answer("18052 remainder 4830", q, r)
    assert check_answer("quotient = 18,052, remainder = 4,830", q, r)
    assert check_answer("18052 4830 (check: 18052 x 5185 + 4830)", q, r)
    assert not check_answer("4830 18052", q, r)  # order matters
    assert not check_answer("18052", q, r)  # the remainder is required when it is not zero
    assert not check_answer("", q, r) and not check_answer(None, q, r) and not check_answer("no idea", q, r)
    assert check_answer("7036", 7036, 0) and check_answer("7036 remainder 0", 7036, 0)
    assert not check_answer("7036 5", 7036, 0)
    for row in released_rows():  # smith's checker agrees with every logged verdict
        p = parse_problem(row["problem"])
        if row["submit"]:
            assert check_answer(row["submit"]["answer"], p.quotient, p.remainder) == row["submit"]["correct"]


# --- budget, labels, prompts -------------------------------------------------------------------------


def test_budget_formula():
    # (900 + 90 max(0, d - 8)) + 1800 T
    assert budget(8, 4) == 900 + 7200 == 8100
    assert budget(10, 4) == 900 + 180 + 7200 == 8280
    assert budget(16, 20) == 900 + 720 + 36000 == 37620
    assert budget(6, 4) == 8100  # no discount below d = 8
    for row in released_rows():
        assert budget(row["difficulty"], row["n"]) == row["budget"]


def test_relabel_letters():
    names = relabel(20, 7)
    assert names == relabel(20, 7) and len(set(names)) == 20
    assert all(len(n) == 6 and n.startswith("tool_") and n[-1].islower() for n in names)
    assert relabel(20, 8) != names
    assert relabel(4, 7) == names[:4]  # candidate i gets the i-th letter of the seed's order, whatever T
    assert relabel(0, 3) == []
    with pytest.raises(ValueError, match=r"0\.\.26"):
        relabel(27, 0)


def test_relabel_matches_the_released_generator():
    """Upstream behaviour, read from scripts/shared/obfuscation.py (assign_letters): the alphabet shuffled by
    random.Random(7919 seed + 13), zipped onto candidates 0..T-1. These values were worked out from that
    rule; the logged sets below are the released runs' own."""
    letters = list("abcdefghijklmnopqrstuvwxyz")
    random.Random(660 * 7919 + 13).shuffle(letters)
    assert relabel(4, 660) == [f"tool_{c}" for c in letters[:4]] == ["tool_u", "tool_v", "tool_t", "tool_k"]
    logged = json.loads((FIXTURES / "logged_labels.json").read_text())
    sets = logged["label_sets"]
    # every distinct label set of the 2,880 released rows (16 models x 180) comes back from its seed
    assert sum(c for *_, c in sets) == logged["rows"] == 2880 and len(sets) == 180
    assert all(relabel(t, seed) == [f"tool_{c}" for c in letters] for t, seed, letters, _ in sets)
    # and those seeds are exactly the sweep's cells, seeded T*131 + d*17 + rep
    cells = plan(["tool_prior"], [4, 8, 12, 16, 20], [15, 9, 6, 3, 3], [8, 10, 12, 14, 16])
    assert sorted((e.tools, relabel_seed(e.tools, e.difficulty, e.rep)) for e in cells) == sorted(
        (t, seed) for t, seed, *_ in sets)
    for row in released_rows():
        assert tool_names(row["n"], True, row["relabel_seed"]) == [row["labels"][str(i)] for i in range(row["n"])]


@pytest.mark.skipif(not RELEASE_DIR.exists(), reason="shared/data/lomekwi_release is not beside the checkout")
def test_relabel_reproduces_every_label_set_of_the_release_copy():
    rows = [json.loads(line) for p in sorted(RELEASE_DIR.rglob("episodes.jsonl"))
            for line in p.read_text().splitlines()]
    assert len(rows) == 720
    assert all(relabel(r["n"], r["relabel_seed"]) == [r["labels"][str(i)] for i in range(r["n"])] for r in rows)


def test_plain_names_are_the_released_config_names():
    assert plain_names(3) == ["tool_alpha", "tool_bravo", "tool_charlie"] == tool_names(3, False, 99)
    names = plain_names(22)
    assert names[19] == "tool_tango" and names[20:] == ["tool_20", "tool_21"] and len(set(names)) == 22


def test_prompts_differ_only_by_the_tool_prior_sentence():
    base, prior = (task_prompt("PROBLEM TEXT", 8, 15300, c) for c in CONDITIONS)
    assert "STRICT BUDGET of 15300 tokens" in base and "You have 8 tools available (plus submit_answer)." in base
    extra = " Exactly one of the 8 tools can solve this problem and return the answer directly."
    assert extra not in base and prior == base.replace("(plus submit_answer).", "(plus submit_answer)." + extra)
    with pytest.raises(ValueError, match="known: baseline, tool_prior"):
        task_prompt("x", 4, 1, "hint")


def test_tools_off_prompt_and_the_free_system_prompt():
    off = task_prompt("PROBLEM TEXT", 0, 200000, "tool_prior")
    assert off == ("Solve the following problem within a STRICT BUDGET of 200000 tokens (every token you read and "
                   "generate counts toward it).\n\nPROBLEM: PROBLEM TEXT\n\nWork the problem out and, when you have "
                   "the answer, call submit_answer with it. You get ONE submission: correct = win, wrong = lose.")
    assert system_prompt(False) == SYSTEM_PROMPT and "AT MOST ONE" in SYSTEM_PROMPT
    free = system_prompt(True, sequential=False)
    assert free == SYSTEM_PROMPT_FREE + " /no_think" and "AT MOST ONE" not in free
    assert "Each turn, either call a tool or call submit_answer." in free


# --- counterfactual scoring on hand-made episodes -----------------------------------------------------


def episode(calls, submit=None, n=4, budget=5000, surcharge=25):
    names = ["tool_a", "tool_b", "tool_c", "tool_d"][:n]
    return {"key": "k", "model": "m", "condition": "baseline", "n": n, "difficulty": 8, "budget": budget,
            "surcharge": surcharge, "labels": {str(i): t for i, t in enumerate(names)},
            "tool_calls": [{"order": k, "tool": t, "meter_raw": m, "turn": k} for k, (t, m) in enumerate(calls)],
            "submit": submit, "stopped_reason": "x"}


def test_tool_cost_is_first_call_meter_plus_surcharge_per_call():
    ep = episode([("tool_c", 1000), ("tool_zz", 2000), ("tool_a", 3000), ("tool_c", 4000), ("tool_d", 4960)])
    rows = score_rollout(ep)
    # a: 3000 + 25*3 = 3075 (the unknown call still counts in the order); b: never; c: first call 1000 + 25;
    # d: 4960 + 25*5 = 5085 > 5000
    assert [r.tool_cost for r in rows] == [3075, math.inf, 1025, 5085]
    assert [r.win for r in rows] == [True, False, True, False]
    assert [r.via for r in rows] == ["tool", "none", "tool", "tool"]
    assert rollout_counts(ep).tolist() == [0, 2, 2, 4]


def test_correct_manual_submission_first_wins_ties_included():
    ep = episode([("tool_a", 500), ("tool_b", 1975)], submit={"meter_raw": 2025, "correct": True, "answer": ""})
    rows = score_rollout(ep)
    # a: 525 < 2025 -> tool; b: 1975 + 50 = 2025 == S -> manual (ties go to the manual path); c, d: manual
    assert [r.via for r in rows] == ["tool", "manual", "manual", "manual"]
    assert rollout_counts(ep).tolist() == [3, 1, 4, 4]
    # a wrong submission never wins; an over-budget correct one neither
    wrong = episode([("tool_a", 500)], submit={"meter_raw": 900, "correct": False, "answer": ""})
    assert rollout_counts(wrong).tolist() == [0, 1, 1, 4]
    late = episode([("tool_a", 500)], submit={"meter_raw": 5001, "correct": True, "answer": ""})
    assert rollout_counts(late).tolist() == [0, 1, 1, 4]


def test_rescoring_budget_and_surcharge():
    ep = episode([("tool_a", 1000), ("tool_b", 2000), ("tool_c", 3000)])
    assert rollout_counts(ep).tolist() == [0, 3, 3, 4]
    assert rollout_counts(ep, budget=2049).tolist() == [0, 1, 1, 4]  # b costs 2050
    assert rollout_counts(ep, budget=2050).tolist() == [0, 2, 2, 4]
    assert rollout_counts(ep, surcharge=700).tolist() == [0, 2, 2, 4]  # c costs 3000 + 2100 = 5100


def test_metrics_pool_scored_rows_and_bootstrap_resamples_rollouts():
    win_all = episode([("tool_a", 1), ("tool_b", 2), ("tool_c", 3), ("tool_d", 4)])
    lose_all = episode([])
    s = summarize([win_all, lose_all], n_boot=4000, seed=1)
    assert s["oracle_discovery"]["value"] == 0.5 and s["manual_success"]["value"] == 0.0
    assert s["overall_success"]["value"] == 0.5 and s["scored"] == 8 and s["rollouts"] == 2
    # Whole rollouts resampled: 1, 0.5, 0 with prob 1/4, 1/2, 1/4 -> SE sqrt(1/8) = 0.354. Resampling the
    # eight rows independently would give sqrt(0.25 / 8) = 0.177.
    assert s["oracle_discovery"]["se"] == pytest.approx(math.sqrt(1 / 8), abs=0.02)
    # a T=8 rollout weighs twice a T=4 one: means are over scored rows
    t8 = {**episode([]), "n": 8, "labels": {str(i): f"tool_{c}" for i, c in enumerate("abcdefgh")}}
    assert summarize([win_all, t8], n_boot=10)["oracle_discovery"]["value"] == pytest.approx(4 / 12)
    with pytest.raises(ValueError, match="no rollouts"):
        summarize([])


# --- importer on real released rows -------------------------------------------------------------------


def test_importer_on_released_rows_hand_computed():
    records, stats = import_logs(RELEASED, "tool_prior")
    assert stats["rollouts"] == 7 and stats["skipped_error_rows"] == 0 and stats["checker_disagreements"] == 0
    by_model = {}
    for r in records:
        by_model.setdefault(r["model"], []).append(r)
    # per rollout [manual wins, oracle wins]; every cost below is computed by hand from the rows:
    expected = {
        "Qwen/Qwen3.5-2B": [
            [4, 0],  # seed 2: no call, correct at 1073 <= 8100 -> four manual wins
            [1, 3],  # seed 6: tool_a 815+25, tool_p 2625+75 (tool_b is no candidate), tool_u 3615+100 all < S=5342;
                     #         tool_i never called -> manual at 5342
            [0, 3],  # seed 14: tool_u 858+25, tool_h 1750+50, tool_e 2676+75; tool_l never; no submission
            [0, 4],  # seed 0 d12: tool_f 741+25, tool_i 2347+75, tool_o 3212+100, tool_h 4111+125; wrong answer
        ],
        "Qwen/Qwen3.5-4B": [[0, 3]],  # tool_j 1906, tool_c 3891, tool_x 5948 <= 8280; correct S=10751 > 8280
        "Qwen/Qwen3.5-9B": [[0, 1]],  # T=12: only tool_m called, 2400+25; four silent turns end it
        "Qwen/Qwen3.5-27B": [[0, 3]],  # tool_b 8856+100 = 8956 > 8280 loses
    }
    for model, rows in expected.items():
        got = [rollout_counts(r).tolist()[:2] for r in by_model[model]]
        assert sorted(got) == sorted(rows), model
    two_b = summarize(by_model["Qwen/Qwen3.5-2B"], n_boot=200)
    assert two_b["manual_success"]["value"] == 5 / 16
    assert two_b["oracle_discovery"]["value"] == 10 / 16
    assert two_b["overall_success"]["value"] == 15 / 16
    assert two_b["tool_calls_per_rollout"] == (0 + 4 + 7 + 5) / 4
    assert (two_b["no_tool_rollouts"], two_b["manual_solves"]) == (1, 2)
    assert summarize(by_model["Qwen/Qwen3.5-9B"], n_boot=10)["oracle_discovery"]["value"] == 1 / 12
    # re-scoring the 2B rows at budget 2000: manual 1073 (x4), tool_a 840, tool_u 883, tool_h 1800, tool_f 766
    low = summarize(by_model["Qwen/Qwen3.5-2B"], budget=2000, n_boot=10)
    assert (low["manual_success"]["value"], low["oracle_discovery"]["value"]) == (4 / 16, 4 / 16)
    # surcharge 600 on 27B: tool_y 6570 + 1800 = 8370 > 8280 drops out
    assert summarize(by_model["Qwen/Qwen3.5-27B"], surcharge=600, n_boot=10)["oracle_discovery"]["value"] == 2 / 4


def test_importer_on_the_qwen25_and_qwen3_tool_prior_runs_hand_computed():
    """The upstream repository's qwen25_v1 and qwen3_dense_v1 runs (not in the release copy) import as is."""
    records, stats = import_logs(FIXTURES / "qwen25_v1", "tool_prior")
    more, more_stats = import_logs(FIXTURES / "qwen3_dense_v1", "tool_prior")
    assert stats["rollouts"] == more_stats["rollouts"] == 2 and stats["checker_disagreements"] == 0
    by_model = {}
    for r in records + more:
        by_model.setdefault(r["model"], []).append(r)
    assert set(by_model) == {"Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen3-32B"}
    # Qwen2.5 line 5: tool_l 601+25, tool_g 1238+50, tool_w 1927+75, tool_n 2667+100, all < S = 3532 -> 4 tool
    # line 151 (T=16, budget 29700): tool_c and tool_e are no candidates but count in the order; the last
    # candidate reached, tool_z, costs 29936 + 25*18 = 30386 > 29700; the other 15 are found in budget
    # (tool_t: 27954 + 25*17 = 28379)
    assert sorted(rollout_counts(r).tolist() for r in by_model["Qwen/Qwen2.5-32B-Instruct"]) == [
        [0, 4, 4, 4], [0, 15, 15, 16]]
    # Qwen3 line 2: 610+25 ... 2626+100 < S = 3372; line 157 (budget 29880): all 16 first calls by tool_s at
    # 25908 + 25*17 = 26333; the repeats after it change nothing
    assert sorted(rollout_counts(r).tolist() for r in by_model["Qwen/Qwen3-32B"]) == [[0, 4, 4, 4], [0, 16, 16, 16]]
    assert summarize(by_model["Qwen/Qwen2.5-32B-Instruct"], n_boot=10)["oracle_discovery"]["value"] == 19 / 20
    # at budget 28379 tool_t still counts; one token less and it drops out
    assert rollout_counts(by_model["Qwen/Qwen2.5-32B-Instruct"][1], budget=28378).tolist()[1] == 14
    assert family_and_size("Qwen/Qwen2.5-32B-Instruct") == ("Qwen2.5", 32.0)
    assert family_and_size("Qwen/Qwen3-0.6B") == ("Qwen3", 0.6) and family_and_size("scripted:manual")[1] is None


def test_pilot_table(tmp_path):
    def row(d, meter, correct):
        return {"model": "m", "difficulty": d, "submit": None if meter is None else
                {"meter_raw": meter, "correct": correct, "answer": ""}}

    records = [row(8, 900, True), row(8, 1001, True), row(8, 700, False), row(8, None, False),
               row(11, 1300, False), {"model": "m", "difficulty": 11, "error": "boom"}]
    s = pilot_report(records, tmp_path, 0.8)
    # d=8: two correct of four, median S = (900 + 1001) / 2 = 950.5, suggested round(0.8 * 950.5) = 760
    assert s["cells"] == [{"model": "m", "d": 8, "episodes": 4, "correct": 2, "accuracy": 0.5, "median_S": 950.5,
                           "suggested_budget": 760},
                          {"model": "m", "d": 11, "episodes": 1, "correct": 0, "accuracy": 0.0, "median_S": None,
                           "suggested_budget": None}]
    assert s["error_rows"] == 1 and "| m | 8 | 4 | 0.500 | 950.500 | 760 |" in (tmp_path / "results.md").read_text()
    metrics = pilot_metrics(s)
    assert metrics["m/d8/accuracy"]["n"] == 4 and metrics["m/d11/median_S"] == metric(None, n=0, unit="tokens per item")


def test_import_validates_and_export_keeps_released_fields():
    row = json.loads((RELEASED / "2B" / "episodes.jsonl").read_text().splitlines()[0])
    record = import_row(row, "tool_prior")
    assert record["key"] == "Qwen/Qwen3.5-2B|tool_prior|T4|d8|r2" and record["condition"] == "tool_prior"
    assert export_row(record) == {k: v for k, v in row.items()}
    with pytest.raises(ValueError, match="lacks tool_calls"):
        import_row({k: v for k, v in row.items() if k != "tool_calls"}, "tool_prior")
    with pytest.raises(ValueError, match="labels but n=5"):
        import_row({**row, "n": 5}, "tool_prior")
