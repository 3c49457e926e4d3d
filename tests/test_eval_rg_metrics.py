"""rg metrics: per-category / per-group / macro accuracy and the stratified bootstrap, computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from smith.evals.rg.metrics import PAPER_COLUMNS, accuracy_table, bootstrap_matrix, interval, paper_row
from smith.evals.rg.summary import _metrics

CORRECT = {"a": [1, 0, 1, 1], "b": [0, 0], "c": [1, 1], "d": [1], "empty": []}
GROUPS = {"a": "Logic", "b": "Games", "c": "Games", "d": "Logic", "empty": "Algebra"}
SPLITS = {"a": "unseen", "b": "unseen", "c": "unseen", "d": "seen", "empty": "unseen"}


def test_bootstrap_matrix_resamples_within_each_category():
    m = bootstrap_matrix([[1, 1, 1], [0, 1], []], n_resamples=500, seed=3)
    assert m.shape == (500, 3)
    assert np.all(m[:, 0] == 1.0)  # a constant category never moves
    assert set(np.unique(m[:, 1])) <= {0.0, 0.5, 1.0}  # means of 2 resampled 0/1 values
    assert 0.3 < m[:, 1].mean() < 0.7
    assert np.all(np.isnan(m[:, 2]))


def test_interval_of_constant_and_missing_resamples():
    assert interval(1.0, np.ones(10)) == {"value": 1.0, "se": 0.0, "lo": 1.0, "hi": 1.0}
    nan = interval(0.5, np.full(10, np.nan))
    assert nan["value"] == 0.5 and math.isnan(nan["lo"]) and math.isnan(nan["se"])


def test_accuracy_table_by_hand():
    t = accuracy_table(CORRECT, GROUPS, SPLITS, n_resamples=2000, seed=0)
    cats = t["categories"]
    assert "empty" not in cats  # a category without items is in no average
    assert (cats["a"]["value"], cats["a"]["n"], cats["a"]["correct"]) == (0.75, 4, 3)
    assert cats["b"]["value"] == 0.0 and cats["c"]["value"] == 1.0
    # Games = mean(0, 1) = 0.5 (categories weigh the same); unseen Avg = mean(Logic 0.75, Games 0.5) = 0.625
    assert t["groups"]["unseen"]["Games"]["value"] == 0.5
    assert t["groups"]["unseen"]["Games"]["se"] == 0.0  # b and c are constant: no resampling noise
    assert t["groups"]["unseen"]["Logic"]["value"] == 0.75
    assert t["macro"]["unseen"]["value"] == pytest.approx(0.625)
    assert t["macro"]["unseen"]["n_groups"] == 2 and t["macro"]["unseen"]["n_categories"] == 3
    # the macro's only noise is category a's: its resampled mean / 2 + 0.25
    a = t["categories"]["a"]
    assert t["macro"]["unseen"]["se"] == pytest.approx(a["se"] / 2, rel=1e-9)
    assert t["macro"]["unseen"]["lo"] == pytest.approx(0.25 + a["lo"] / 2)
    assert a["lo"] <= a["value"] <= a["hi"]
    assert t["macro"]["seen"]["value"] == 1.0 and t["groups"]["seen"]["Logic"]["n_categories"] == 1


def test_paper_row_formats_percent_and_tokens():
    t = accuracy_table(CORRECT, GROUPS, SPLITS, n_resamples=200, seed=0)
    rows = [{"split": SPLITS[c], "group": GROUPS[c]} for c, v in CORRECT.items() for _ in v]
    summary = {"metrics": _metrics(t, rows, {"input": 664.4, "output": 1234.0, "n": len(rows)})}  # results schema
    row = paper_row(summary)
    assert list(row) == list(PAPER_COLUMNS)
    assert row["Seen Avg"] == "100.0±0.0"
    assert row["Game"] == "50.0±0.0"
    assert row["Logic"].startswith("75.0±") and row["Avg"].startswith("62.5±")
    assert row["Algebra"] is None and row["Arith"] is None and row["Algo"] is None
    assert row["I/O tokens"] == "664 / 1,234"
