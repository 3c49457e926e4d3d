"""smith.tasks: the catalog, seeded cached items, band disjointness and hardness, guarded scoring."""

from __future__ import annotations

import statistics

import pytest
import reasoning_gym
from reasoning_gym.factory import DATASETS

from smith.tasks import GROUPS, Item, items, load_catalog, score
from smith.tasks.catalog import DEFAULT_PATH
from smith.tasks.store import band_seed

CATALOG = load_catalog()
NAMES = CATALOG.names
N_HARD, N_EASY = 50, 10
# docs/architecture.md, "Facts from released code": the 23 tasks the SMITH reference code draws from
REFERENCE_23 = set(
    [
        "ab",
        "base_conversion",
        "bitwise_arithmetic",
        "caesar_cipher",
        "calendar_arithmetic",
        "chain_sum",
        "count_bits",
        "countdown",
        "cryptarithm",
        "gcd",
        "isomorphic_strings",
        "knights_knaves",
        "lcm",
        "polynomial_equations",
        "polynomial_multiplication",
        "prime_factorization",
        "propositional_logic",
        "simple_equations",
        "simple_integration",
        "spell_backward",
        "syllogism",
        "tower_of_hanoi",
        "word_ladder",
    ]
)


def test_catalog_has_13_seen_and_at_least_6_unseen_across_all_groups():
    assert len(CATALOG.seen) == 13
    assert len(CATALOG.unseen) >= 6
    assert len(set(NAMES)) == len(NAMES)
    for split in ("seen", "unseen"):
        groups = CATALOG.by_group(split)
        assert set(groups) == set(GROUPS)
        assert all(groups[g] for g in GROUPS), f"a group has no {split} category: {groups}"


def test_catalog_entries_are_real_tasks_with_reasons_and_avoid_the_traps():
    assert sum(c.name in REFERENCE_23 for c in CATALOG.categories) >= 18  # drawn from the reference tasks
    for c in CATALOG.categories:
        assert c.dataset in DATASETS, f"{c.name}: not a reasoning-gym dataset"
        assert len(c.why) > 30, f"{c.name}: say why it is in"
        assert len(c.full_marks_why) > 30, f"{c.name}: say why its full-marks check is enough"
        for band in ("easy", "hard"):
            reasoning_gym.create_dataset(c.dataset, size=1, seed=0, **c.config(band))  # a valid config
    # docs/architecture.md, "reasoning-gym": traps
    assert not {"syllogism", "gcd", "puzzle24", "circuit_logic"} & set(NAMES)
    base = CATALOG.get("base_conversion")
    assert base.easy["min_value"] >= 1 and base.hard["min_value"] >= 1
    assert all("curriculum" not in str(c.easy) + str(c.hard) for c in CATALOG.categories)


def test_catalog_get_and_load_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="not in the catalog; known: chain_sum"):
        CATALOG.get("chainsum")
    with pytest.raises(FileNotFoundError, match="not found"):
        load_catalog(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT_PATH.read_text().replace("group: Logic", "group: Logik", 1))
    with pytest.raises(ValueError, match="group 'Logik'"):
        load_catalog(bad)
    with pytest.raises(ValueError, match="band 'medium' unknown"):
        CATALOG.get("lcm").config("medium")
    unchecked = tmp_path / "unchecked.yaml"
    unchecked.write_text(DEFAULT_PATH.read_text().replace("check: equal\n", "check: roughly\n", 1))
    with pytest.raises(ValueError, match=r"'lcm' needs full_marks: \{check: one of \['antiderivative'"):
        load_catalog(unchecked)


def test_items_are_reproducible_prefix_stable_and_cached(tmp_path):
    a = items("lcm", "hard", 8, seed=3, cache_dir=tmp_path / "a")
    b = items("lcm", "hard", 8, seed=3, cache_dir=tmp_path / "b")  # a fresh cache regenerates the same items
    assert [i.question for i in a] == [i.question for i in b]
    assert [i.to_json() for i in items("lcm", "hard", 4, seed=3, cache_dir=tmp_path / "c")] == [
        i.to_json() for i in a[:4]
    ]
    other = items("lcm", "hard", 8, seed=4, cache_dir=tmp_path / "a")
    assert {i.question for i in other}.isdisjoint({i.question for i in a})
    files = sorted((tmp_path / "a").glob("lcm-hard-seed3-*.jsonl"))
    assert len(files) == 1 and len(files[0].read_text().splitlines()) == 8
    assert Item.from_json(files[0].read_text().splitlines()[0]) == a[0]
    assert items("lcm", "hard", 5, seed=3, cache_dir=tmp_path / "a") == a[:5]  # served from the file
    assert band_seed("lcm", "easy", 3) != band_seed("lcm", "hard", 3)


def test_items_reject_bad_requests(tmp_path):
    with pytest.raises(ValueError, match="band"):
        items("lcm", "medium", 2, 0, tmp_path)
    with pytest.raises(ValueError, match="distinct valid items"):
        items("tower_of_hanoi", "easy", 40, 0, tmp_path)  # only 18 distinct easy Hanoi questions exist


@pytest.mark.parametrize("name", NAMES)
def test_bands_never_overlap_and_hard_is_harder(name, rg_cache):
    cat = CATALOG.get(name)
    hard = items(name, "hard", N_HARD, 0, rg_cache)
    easy = items(name, "easy", N_EASY, 0, rg_cache)
    assert len({i.question for i in hard}) == N_HARD and len({i.question for i in easy}) == N_EASY
    assert {i.question for i in hard}.isdisjoint(i.question for i in easy)
    # disjoint across seeds too: the other seed's hard band shares nothing with this easy band
    assert {i.question for i in items(name, "hard", 16, 1, rg_cache)}.isdisjoint(i.question for i in easy)
    h = statistics.mean(cat.hardness(i.question, i.answer, i.entry["metadata"]) for i in hard)
    e = statistics.mean(cat.hardness(i.question, i.answer, i.entry["metadata"]) for i in easy)
    assert h > e, f"{name}: hard band is not harder by {cat.measure} ({h} <= {e})"


@pytest.mark.parametrize("name", NAMES)
def test_every_item_answer_scores_one_and_metadata_stays_out_of_the_question(name, rg_cache):
    for it in items(name, "hard", N_HARD, 0, rg_cache)[:16] + items(name, "easy", N_EASY, 0, rg_cache):
        assert it.category == name and it.id.startswith(f"{name}/")
        assert isinstance(it.answer, str) and it.answer
        assert score(name, it.answer, it) == 1.0
        assert score(name, f"  {it.answer}\n", it) == 1.0  # stripped before scoring
        assert "metadata" not in it.question and "source_dataset" not in it.question


def test_score_is_guarded_and_all_or_nothing(rg_cache, tmp_path):
    hanoi = items("tower_of_hanoi", "hard", 1, 0, rg_cache)[0]
    moves = hanoi.answer.splitlines()
    first = moves[0].split()  # Move disk D from Peg A to Peg B
    detour = [moves[0], f"Move disk {first[2]} from Peg {first[8]} to Peg {first[5]}", *moves]
    ds = reasoning_gym.create_dataset("tower_of_hanoi", size=1, seed=0, **CATALOG.get("tower_of_hanoi").hard)
    assert 0 < ds.score_answer("\n".join(detour), hanoi.entry) < 1  # the dataset gives partial credit ...
    assert score("tower_of_hanoi", "\n".join(detour), hanoi) == 0.0  # ... which counts as wrong
    cd = items("countdown", "hard", 1, 0, rg_cache)[0]
    assert score("countdown", None, cd) == 0.0
    assert score("countdown", 12, cd) == 0.0
    assert score("countdown", "", cd) == 0.0
    assert score("countdown", "((((", cd) == 0.0  # the scorer's parser fails: 0, no exception
    # answers that are not plain expressions never reach sympy's eval
    marker = tmp_path / "pwned"
    assert score("countdown", f"__import__('pathlib').Path('{marker}').touch()", cd) == 0.0
    assert score("countdown", "9**9**9**9", cd) == 0.0
    assert not marker.exists()
    with pytest.raises(ValueError, match="belongs to 'countdown'"):
        score("lcm", "1", cd)
