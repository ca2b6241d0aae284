"""A lever TVM refuses is skipped where it was refused and said in one line (issue 38; pure parts:
``analysis/levers.py`` refusals and the search for the bindings a lever may apply to together,
``analysis/default_candidate.py``'s kernels with nothing to tune, the model view's notes)."""
from __future__ import annotations

from asight_lsp.analysis import default_candidate as dc
from asight_lsp.analysis import levers
from asight_lsp.views.model import model_view

REASON = "InternalError: Invalid SLayout:can't find S in source layoutABCDE"


def _refuses_any(bad: set):
    tried = []

    def refuses(subset: list) -> str | None:
        tried.append(list(subset))
        hit = bad & set(subset)
        return f"refused {sorted(hit)[0]}" if hit else None
    return refuses, tried


def test_accepted_subset_keeps_what_was_taken_together_and_names_the_rest():
    refuses, tried = _refuses_any({"c", "f"})
    kept, reasons = levers.accepted_subset(list("abcdefgh"), refuses)
    assert kept == list("abdegh")
    assert reasons == {"c": "refused c", "f": "refused f"}
    assert kept in tried                       # the kept set was tried exactly as kept


def test_accepted_subset_all_taken_in_one_try_and_none_taken():
    refuses, tried = _refuses_any(set())
    assert levers.accepted_subset(["a", "b"], refuses) == (["a", "b"], {})
    assert tried == [["a", "b"]]
    refuses, _ = _refuses_any({"a", "b"})
    assert levers.accepted_subset(["a", "b"], refuses) == ([], {"a": "refused a", "b": "refused b"})
    assert levers.accepted_subset([], refuses) == ([], {})


def test_accepted_subset_when_items_refuse_only_together():
    """Two convolutions feeding one Sum: each alone is taken, both together are not; the first stays."""
    def refuses(subset):
        return "both" if {"a", "b"} <= set(subset) else None
    assert levers.accepted_subset(["a", "b", "c"], refuses) == (["a", "c"], {"b": "both"})


def test_refusal_line_names_lever_kernel_step_reason_and_what_to_do():
    r = levers.Refusal("nhwc", levers.STEPS["nhwc"], REASON, "conv2d lv8 (line 21)")
    line = levers.refusal_line(r)
    assert "\n" not in line
    for part in ("nhwc", "conv2d lv8 (line 21)", "ConvertLayout", "Invalid SLayout", "keeps the model's layout",
                 "ASIGHT_LEVERS_OFF=nhwc"):
        assert part in line
    whole = levers.refusal_line(levers.Refusal("winograd", levers.STEPS["winograd"], "ValueError: no"))
    assert "on the whole model" in whole and "direct form" in whole
    assert levers.Refusal.of(r.as_dict()) == r


def test_refusals_merge_once_and_lines_come_from_the_run_and_the_reply():
    a = levers.Refusal("nhwc", "s", REASON, "lv").as_dict()
    b = levers.Refusal("layout", "t", "E: x").as_dict()
    assert levers.merge_refusals([a], [a, b]) == [a, b]
    extra = {levers.REFUSED_KEY: [a]}
    assert levers.refusals_of(extra, {levers.REFUSED_KEY: [a, b]}) == [a, b]
    assert len(levers.refusal_lines(extra, {levers.REFUSED_KEY: [b]})) == 2
    assert levers.refusal_lines(None) == [] and levers.refusal_lines({}) == []


def test_nothing_to_tune_and_its_entry_is_a_kept_default():
    assert dc.nothing_to_tune(0.0, 5) and dc.nothing_to_tune(512.0, 0)
    assert not dc.nothing_to_tune(512.0, 3) and not dc.nothing_to_tune(None, None)
    entry = dc.untried_entry("transpose", "123", 1.5, {"cold": True})
    chosen, kept = dc.split([entry])
    assert chosen == [] and kept == [entry]
    assert entry["default"] == dc.NOTHING_TO_TUNE and entry["trial"] is None


def test_model_view_notes_each_refusal():
    profile = {"relax": {"function": "main", "tasks": {"tuned": {"tasks": []}}}}
    extra = {levers.REFUSED_KEY: [levers.Refusal("nhwc", levers.STEPS["nhwc"], REASON, "conv2d lv").as_dict()]}
    view = model_view(profile, tuning=extra)
    assert len(view["leversRefused"]) == 1
    assert view["leversRefused"][0] in view["notes"]


def test_model_view_says_a_kernel_with_nothing_to_tune_kept_its_default():
    call = {"task": "transpose", "call": 0, "us": 1.0, "vars": ["lv"], "lines": [3, 3]}
    profile = {"relax": {"function": "main", "tasks": {"tuned": {"tasks": [call]}},
                         "task_records": {"transpose": {"trials": 0}}},
               "measurement": {"defaults": [dc.untried_entry("transpose", "1", 0.8, {"cold": False})]}}
    row = model_view(profile)["tasks"][0]
    assert row["defaultKept"]["nothingToTune"] is True
    assert any("nothing to tune" in n for n in row["levers"])


def test_reason_line_is_the_last_line_without_the_condition():
    err = RuntimeError("Traceback (most recent call last):\n  0: f\nCheck failed: (res != npos) is false: Invalid SLayout")
    assert levers.reason_line(err) == "RuntimeError: Invalid SLayout"
    assert levers.reason_line(ValueError("")) == "ValueError: ValueError"
