"""Recognition MCP, pure parts: division, budget, counterfactual scoring, bootstrap, importer on real rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from smith.evals.recognition_mcp.division import check_answer, long_division, parse_problem
from smith.evals.recognition_mcp.host import CONDITIONS, budget, relabel, task_prompt
from smith.evals.recognition_mcp.importer import export_row, import_logs, import_row
from smith.evals.recognition_mcp.scoring import rollout_counts, score_rollout, summarize

FIXTURES = Path(__file__).parent / "fixtures" / "recognition_mcp"
RELEASED = FIXTURES / "qwen35_v2"


def released_rows() -> list[dict]:
    return [json.loads(line) for p in sorted(RELEASED.rglob("episodes.jsonl")) for line in p.read_text().splitlines()]


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
    with pytest.raises(ValueError, match=r"1\.\.26"):
        relabel(27, 0)


def test_prompts_differ_only_by_the_tool_prior_sentence():
    base, prior = (task_prompt("PROBLEM TEXT", 8, 15300, c) for c in CONDITIONS)
    assert "STRICT BUDGET of 15300 tokens" in base and "You have 8 tools available (plus submit_answer)." in base
    extra = " Exactly one of the 8 tools can solve this problem and return the answer directly."
    assert extra not in base and prior == base.replace("(plus submit_answer).", "(plus submit_answer)." + extra)
    with pytest.raises(ValueError, match="known: baseline, tool_prior"):
        task_prompt("x", 4, 1, "hint")


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
    records, stats = import_logs(FIXTURES, "tool_prior")
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


def test_import_validates_and_export_keeps_released_fields():
    row = json.loads((RELEASED / "2B" / "episodes.jsonl").read_text().splitlines()[0])
    record = import_row(row, "tool_prior")
    assert record["key"] == "Qwen/Qwen3.5-2B|tool_prior|T4|d8|r2" and record["condition"] == "tool_prior"
    assert export_row(record) == {k: v for k, v in row.items()}
    with pytest.raises(ValueError, match="lacks tool_calls"):
        import_row({k: v for k, v in row.items() if k != "tool_calls"}, "tool_prior")
    with pytest.raises(ValueError, match="labels but n=5"):
        import_row({**row, "n": 5}, "tool_prior")
