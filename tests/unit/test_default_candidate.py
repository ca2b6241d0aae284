"""The default schedule as one more candidate (analysis/default_candidate.py, pure)."""
from asight_lsp.analysis import default_candidate as rule


def test_a_default_faster_than_every_trial_is_kept():
    assert rule.default_wins(9.0, 3900.0)            # the `mean` task of issue 21: 9 us untuned, 3.9 ms tuned
    assert not rule.default_wins(120.0, 80.0) and not rule.default_wins(None, 80.0)
    assert not rule.default_wins(80.0, 80.0)         # a tie keeps the tuned record
    chosen = [{"task": "conv", "default_wins": False}, {"task": "mean", "default_wins": True}, {"task": "fc"}]
    applied, kept = rule.split(chosen)
    assert [c["task"] for c in applied] == ["conv", "fc"] and [c["task"] for c in kept] == ["mean"]


def test_a_clearly_slower_default_is_not_timed_in_rounds():
    assert rule.worth_timing(2.9, 1.0) and rule.worth_timing(3.0, 1.0)
    assert not rule.worth_timing(3.1, 1.0) and not rule.worth_timing(None, 1.0)
    assert not rule.worth_timing(250_000.0, 2_160.0)   # an untuned conv against its tuned 2.16 ms
