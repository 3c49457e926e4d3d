"""Issue 6: per-axis advantages (normalise each axis within its group, then weighted sum) by hand."""

from __future__ import annotations

import math

import pytest
import torch

from smith.train.advantages import ADVANTAGES, per_axis_advantages, summed_advantages

NAN = math.nan
W = torch.tensor([1.0, 1.0, 0.2, 1.0])  # format, evaluation, judge, use


def test_hand_computed_build_and_use_groups():
    rewards = torch.tensor([
        # build group: format equal (no signal), evaluation 0.25 vs 0.75, judge 0.9 vs 0.8 (std 0.05 < floor)
        [0.5, 0.25, 0.9, NAN],
        [0.5, 0.75, 0.8, NAN],
        # use group: only the use axis applies
        [NAN, NAN, NAN, 2.0],
        [NAN, NAN, NAN, 0.6],
    ])
    out = per_axis_advantages(rewards, num_generations=2, weights=W, std_floor=0.1)
    # evaluation: mean 0.5, std 0.25 -> z = -1, +1; judge: mean 0.85, std 0.05 floored to 0.1 -> z = +0.5, -0.5
    # advantage = 1*z_eval + 0.2*z_judge
    expected = torch.tensor([-1 + 0.2 * 0.5, 1 - 0.2 * 0.5, 1.0, -1.0])
    assert torch.allclose(out.advantages, expected, atol=1e-6)
    assert out.per_axis[0, 0] == 0 and out.per_axis[2, 0] == 0  # no signal / not applicable -> 0
    assert out.keep.tolist() == [True, True, True, True]


def test_std_floor_stops_a_near_constant_axis_from_blowing_up():
    rewards = torch.tensor([[NAN, NAN, 0.50, NAN], [NAN, NAN, 0.52, NAN]])
    loose = per_axis_advantages(rewards, 2, W, std_floor=1e-8)
    floored = per_axis_advantages(rewards, 2, W, std_floor=0.1)
    assert loose.per_axis[:, 2].abs().tolist() == pytest.approx([1.0, 1.0])
    assert floored.per_axis[:, 2].tolist() == pytest.approx([-0.1, 0.1])


def test_zero_variance_groups_are_dropped_unless_disabled():
    rewards = torch.tensor([
        [0.0, 0.0, 0.0, NAN], [0.0, 0.0, 0.0, NAN],  # malformed twice: zero on every axis, no signal
        [0.5, 1.0, NAN, NAN], [0.0, 0.0, NAN, NAN],
    ])
    out = per_axis_advantages(rewards, 2, W, std_floor=0.1)
    assert out.keep.tolist() == [False, False, True, True]
    assert out.advantages[:2].tolist() == [0.0, 0.0]
    kept = per_axis_advantages(rewards, 2, W, std_floor=0.1, dynamic_sampling="off")
    assert kept.keep.all()


def test_group_size_must_divide():
    with pytest.raises(ValueError, match="groups of 3"):
        per_axis_advantages(torch.zeros(4, 4), 3, W, std_floor=0.1)


def test_sum_then_normalize_by_hand():
    """Plain GRPO on the weighted sum (a missing axis counts 0): one z-score per sample, split by axis."""
    rewards = torch.tensor([[0.5, 0.25, 0.9, NAN], [0.5, 0.75, 0.8, NAN],
                            [NAN, NAN, NAN, 2.0], [NAN, NAN, NAN, 2.0]])
    out = summed_advantages(rewards, 2, W, std_floor=0.1)
    # build sums: 0.5 + 0.25 + 0.18 = 0.93 and 0.5 + 0.75 + 0.16 = 1.41 -> mean 1.17, std 0.24
    assert out.advantages[:2].tolist() == pytest.approx([-1.0, 1.0])
    assert torch.allclose((out.per_axis * W).sum(-1)[:2], out.advantages[:2], atol=1e-6)
    # the use group is constant: no signal, dropped (and kept, unweighted, when dynamic sampling is off)
    assert out.keep.tolist() == [True, True, False, False] and out.signal.tolist() == out.keep.tolist()
    assert summed_advantages(rewards, 2, W, std_floor=0.1, dynamic_sampling="off").keep.all()


def test_estimators_are_chosen_by_name():
    assert {"per_axis": per_axis_advantages, "sum_then_normalize": summed_advantages} == ADVANTAGES
    rewards = torch.tensor([[1.0, NAN, NAN, NAN], [0.0, NAN, NAN, NAN]])
    for name, estimate in ADVANTAGES.items():
        out = estimate(rewards, 2, W, std_floor=0.1)
        assert out.advantages.tolist() == pytest.approx([1.0, -1.0]), name


@pytest.mark.parametrize("name", ["per_axis", "sum_then_normalize"])
def test_an_axis_that_does_not_apply_moves_no_advantage(name):
    """Issue 44 (2): a NaN r_eval (every question faulted) beside a peer's equal one is no signal in any estimator;
    `sum_then_normalize` used to count it 0, a penalty (advantages -1, +1)."""
    w = torch.tensor([1.0, 1.0])
    out = ADVANTAGES[name](torch.tensor([[0.5, NAN], [0.5, 0.5]]), 2, w, std_floor=0.1)
    assert out.advantages.tolist() == [0.0, 0.0] and not out.signal.any()
    # where the other axis varies, the NaN sample's advantage comes from that axis alone
    out = ADVANTAGES[name](torch.tensor([[0.0, NAN], [1.0, 0.5]]), 2, w, std_floor=0.1)
    assert out.advantages.tolist() == pytest.approx([-1.0, 1.0])


@pytest.mark.parametrize("name", ["per_axis", "sum_then_normalize"])
def test_variance_on_a_zero_weight_axis_is_no_signal(name):
    """Issue 44 (3): a group whose only varying axis has weight 0 has all-zero advantages, so it is dropped (and
    refilled), not kept as if it had signal."""
    w = torch.tensor([1.0, 1.0, 0.0, 1.0])
    rewards = torch.tensor([[0.5, 1.0, 0.9, NAN], [0.5, 1.0, 0.1, NAN], [0.5, 1.0, 0.9, NAN], [0.5, 0.5, 0.1, NAN]])
    out = ADVANTAGES[name](rewards, 2, w, std_floor=0.1)
    assert out.signal.tolist() == [False, False, True, True] and out.keep.tolist() == out.signal.tolist()
    assert out.advantages[:2].tolist() == [0.0, 0.0]
