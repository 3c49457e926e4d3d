"""BoR audit of retrieval logs: the reference's collapse-zone verdicts, aggregate numbers worked out by hand,
and the JSONL / CSV loaders (aliases, explicit mapping, default_R / R_frac, skipped and bad rows)."""

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from smith.evals.bor import QueryRecord, audit, from_csv, from_jsonl, p_rand
from smith.evals.bor.auditing import verdict

FIXTURES = Path(__file__).parent / "fixtures" / "bor"


def _p(N: int, R: int, K: int) -> float:
    """P_rand by hand: 1 - C(N-R, K) / C(N, K) as an exact fraction."""
    return float(1 - Fraction(math.comb(N - R, K), math.comb(N, K)))


def test_collapse_zone_wins_over_the_bits():
    # the reference's case 2: N=400k, R=20k, K=100, every query a hit; P_rand 0.994, so 1.0 is base rate
    res = audit([QueryRecord(400_000, 20_000, 100, True)] * 50, n_bootstrap=200)
    assert res.p_obs == 1.0 and res.p_rand_mean == pytest.approx(0.9941, abs=5e-5)
    assert res.frac_collapse_zone == 1.0 and res.bor < 0.05 and res.verdict == "COLLAPSE ZONE"
    assert res.lambda_mean == 5.0
    # half the queries at P_rand = 19/20 (exactly the 0.95 line) and BoR above one bit: still the zone
    recs = [QueryRecord(20, 1, 19, True), QueryRecord(10_000, 1, 1, True)]
    res = audit(recs, n_bootstrap=50)
    assert res.bor == pytest.approx(math.log2(1 / ((0.95 + 0.0001) / 2))) and res.bor > 1
    assert res.frac_collapse_zone == 0.5 and res.verdict == "COLLAPSE ZONE"


def test_each_verdict():
    # a perfect retriever at N=1000, R=10, K=10 earns exactly the ceiling -log2 P_rand
    res = audit([QueryRecord(1000, 10, 10, True)] * 100, n_bootstrap=200)
    assert res.bor == pytest.approx(-math.log2(_p(1000, 10, 10)), rel=1e-12)
    assert res.bor_ceiling_mean == pytest.approx(res.bor, rel=1e-12)
    assert res.bor_ci[0] <= res.bor + 1e-9 and res.bor - 1e-9 <= res.bor_ci[1]
    assert res.verdict == "SELECTIVE" and f"{1 / _p(1000, 10, 10):.1f}x a blind draw" in res.reason
    # P_obs 0.5 against P_rand 1 - C(90,10)/C(100,10) = 0.6695: below chance
    res = audit([QueryRecord(100, 10, 10, i % 2 == 0) for i in range(100)], n_bootstrap=100)
    assert res.p_rand_mean == pytest.approx(_p(100, 10, 10)) and res.bor < 0 and res.verdict == "AT/BELOW RANDOM"
    # 3 of 4 hits at P_rand 5/10: log2 1.5 = 0.585 bits, WEAK
    res = audit([QueryRecord(10, 1, 5, h) for h in (1, 1, 0, 1)], n_bootstrap=100)
    assert res.bor == pytest.approx(math.log2(1.5)) and res.verdict == "WEAK"
    # all hits at P_rand 2/10: log2 5 bits, "5.0x a blind draw"
    res = audit([QueryRecord(10, 1, 2, True)] * 4, n_bootstrap=100)
    assert res.bor == pytest.approx(math.log2(5)) and res.verdict == "SELECTIVE" and "5.0x" in res.reason
    # no relevant tool anywhere: no hits is 0/0 (UNDEFINED), hits are +inf (SELECTIVE, unbounded)
    res = audit([QueryRecord(50, 0, 10, False)] * 20, n_bootstrap=50)
    assert math.isnan(res.bor) and res.verdict == "UNDEFINED" and res.bor_ceiling_mean == math.inf
    res = audit([QueryRecord(50, 0, 10, True)] * 20, n_bootstrap=50)
    assert res.bor == math.inf and res.verdict == "SELECTIVE" and "unbounded" in res.reason
    assert verdict(-math.inf, 0.0, 0.3, 0.0)[0] == "AT/BELOW RANDOM"  # never hit although chance could


def test_success_of_at_least_m_and_records():
    # m = 2 at N=5, R=2, K=3: P(both relevant drawn) = C(3,1) / C(5,3) = 3/10
    rec = QueryRecord(5, 2, 3, True, m=2)
    assert rec.p_rand == pytest.approx(0.3) and rec.lam == pytest.approx(1.2)
    assert QueryRecord(5.0, 2, 3, True).N == 5  # a whole float is a count
    with pytest.raises(ValueError, match="N must be a whole number"):
        QueryRecord(5.5, 2, 3, True)
    with pytest.raises(ValueError, match="0 <= R <= N"):
        QueryRecord(5, 6, 3, True)
    with pytest.raises(ValueError, match="no query records"):
        audit([])


def test_fixture_log_by_hand():
    recs = from_jsonl(FIXTURES / "retrieval_log.jsonl")
    # q6 has no pool size and is skipped; the blank line too
    assert [r.qid for r in recs] == ["q1", "q2", "q3", "q4", "q5"]
    assert [r.hit for r in recs] == [True, True, False, True, True]
    res = audit(recs, n_bootstrap=500)
    prs = [0.2, 17 / 45, 0.25, 1.0, 0.01]  # K/N; 1 - C(8,2)/C(10,2); K/N; K > N - R; K/N
    assert [r.p_rand for r in recs] == pytest.approx(prs, rel=1e-14)
    assert res.p_obs == 0.8 and res.p_rand_mean == pytest.approx(sum(prs) / 5)
    assert res.bor == pytest.approx(math.log2(0.8 / (sum(prs) / 5)))  # 1.1220 bits, as the reference prints
    assert round(res.bor, 4) == 1.1220
    assert res.bor_ceiling_mean == pytest.approx(sum(-math.log2(p) for p in prs) / 5)  # 2.4740
    assert res.lambda_mean == pytest.approx((0.2 + 0.4 + 0.25 + 1.5 + 0.01) / 5)  # 0.4720
    assert res.frac_collapse_zone == 0.2 and res.verdict == "SELECTIVE"
    assert res.bor_ci[0] < res.bor < res.bor_ci[1]
    text = res.summary()
    assert "+1.1220" in text and "20%" in text and text.endswith("2.2x a blind draw at these depths.")


def test_csv_without_R_takes_default_R_or_R_frac():
    recs = from_csv(FIXTURES / "retrieval_log.csv", default_R=2)
    assert [(r.N, r.R, r.K, r.hit, r.qid) for r in recs] == [
        (40, 2, 4, True, "r1"), (40, 2, 4, False, "r2"), (40, 2, 8, True, "r3"), (30, 2, 3, False, "r4")]
    assert audit(recs, n_bootstrap=100).p_rand_mean == pytest.approx(
        (2 * _p(40, 2, 4) + _p(40, 2, 8) + _p(30, 2, 3)) / 4)  # 0.2355
    # R = max(1, round(0.1 N)): 4 for N = 40, 3 for N = 30
    assert [r.R for r in from_csv(FIXTURES / "retrieval_log.csv", R_frac=0.1)] == [4, 4, 4, 3]
    # Python's round (half to even) and never below 1, as the reference: 0.0625 * 40 = 2.5 -> 2; 0.0125 * 30 -> 1
    assert [r.R for r in from_csv(FIXTURES / "retrieval_log.csv", R_frac=0.0625)] == [2, 2, 2, 2]
    assert [r.R for r in from_csv(FIXTURES / "retrieval_log.csv", R_frac=0.0125)] == [1, 1, 1, 1]
    with pytest.raises(ValueError, match=r"line 2: no relevant-count field \(R\); pass default_R or R_frac"):
        from_csv(FIXTURES / "retrieval_log.csv")


def _jsonl(tmp_path: Path, rows: list) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_aliases_precedence_and_mapping(tmp_path):
    # every alias of the reference's table is read; the first present wins
    row = {"total_docs": 60, "shortlist_size": 6, "contains_relevant": 1, "n_relevant": 3, "trace_id": 7}
    (rec,) = from_jsonl(_jsonl(tmp_path, [row]))
    assert (rec.N, rec.K, rec.R, rec.hit, rec.qid) == (60, 6, 3, True, "7")
    (rec,) = from_jsonl(_jsonl(tmp_path, [{"N": 10, "pool_size": 99, "k": 2, "label": "T", "r": 1}]))
    assert (rec.N, rec.K, rec.hit) == (10, 2, True)
    # the row's own R beats default_R, which beats R_frac
    path = _jsonl(tmp_path, [{"n": 100, "K": 5, "hit": 1, "R": 7}, {"n": 100, "K": 5, "hit": 1}])
    assert [r.R for r in from_jsonl(path, default_R=3, R_frac=0.5)] == [7, 3]
    # an explicit mapping replaces the aliases of the fields it names
    recs = from_jsonl(FIXTURES / "custom_columns.jsonl", mapping={"N": "corpus", "K": "shown", "hit": "ok", "R": "rel"})
    assert [(r.N, r.R, r.K, r.hit) for r in recs] == [(50, 1, 5, True), (50, 1, 5, False)]
    with pytest.raises(ValueError, match=r"mapping names unknown fields \['depth'\]"):
        from_jsonl(path, mapping={"depth": "k"})


def test_rows_are_read_as_the_reference_reads_them(tmp_path):
    rows = [
        {"N": 10, "K": 25, "R": 12, "hit": "Yes"},  # K and R above N become N
        {"N": 10, "K": 2, "R": 1, "hit": 0.5},  # a number above 0 is a hit
        {"N": 10, "K": 2, "R": 1, "hit": "success"},
        {"N": "10", "K": "2.0", "R": 1, "hit": "0"},  # counts and hits written as text
        {"N": 10, "K": 2, "R": 1, "hit": None},  # no hit: skipped
    ]
    recs = from_jsonl(_jsonl(tmp_path, rows))
    assert [(r.N, r.R, r.K, r.hit) for r in recs] == [
        (10, 10, 10, True), (10, 1, 2, True), (10, 1, 2, True), (10, 1, 2, False)]
    with pytest.raises(ValueError, match=r"line 5: no hit field; keys present: \['K', 'N', 'R', 'hit'\]"):
        from_jsonl(_jsonl(tmp_path, rows), strict=True)


@pytest.mark.parametrize(("row", "message"), [
    ({"N": 600.5, "K": 2, "R": 1, "hit": 1}, "line 1: N must be a whole number; got 600.5"),
    ({"N": 600, "K": "two", "R": 1, "hit": 1}, "line 1: K must be a whole number; got 'two'"),
    ({"N": 600, "K": 2, "R": 1, "hit": "maybe"}, "line 1: hit must be a boolean, a number or one of"),
    ([600, 2, 1, True], "line 1: a row must be a JSON object; got list"),
])
def test_bad_rows_are_one_line_errors(tmp_path, row, message):
    with pytest.raises(ValueError, match=message):
        from_jsonl(_jsonl(tmp_path, [row]))


def test_bad_files_and_options(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"N": 10, "K": 2, "R": 1, "hit": 1}\n{"N": 10,\n')
    with pytest.raises(ValueError, match="line 2: not valid JSON"):
        from_jsonl(path)
    csv_path = tmp_path / "log.csv"
    csv_path.write_text("N,K,R,hit\n10,2,1,true\n10,2.5,1,true\n")
    with pytest.raises(ValueError, match="line 3: K must be a whole number"):
        from_csv(csv_path)
    with pytest.raises(ValueError, match=r"R_frac must be in \(0, 1\]"):
        from_csv(csv_path, R_frac=1.5)
    # an empty CSV cell is an absent field: R falls back to default_R
    csv_path.write_text("N,K,R,hit\n10,2,,true\n")
    assert from_csv(csv_path, default_R=1)[0].p_rand == p_rand(10, 1, 2)
