"""When DLight's default schedule beats the tuned program on a GPU, the run keeps DLight
(analysis/default_candidate.py: the same rule and the same ``defaults`` a model's task uses on a CPU)."""
from __future__ import annotations

from asight_lsp.analysis import default_candidate as rule
from asight_lsp.analysis.gpu_headline import headline

DLIGHT = {"kind": "dlight", "label": "DLight's default schedule"}
CHOSEN = [{"task": "main", "workload": 0, "workload_hash": "123", "trial": 76, "tuning_us": 134.6,
           "measured_us": 140.0}]


def record(base: float, tuned: float | None, verdict: str) -> dict:
    out = {"untuned": {"median_us": base}, "baseline": DLIGHT, "chosen": [dict(c) for c in CHOSEN], "defaults": []}
    if tuned is not None:
        out.update(tuned={"median_us": tuned}, verdict=verdict, speedup={"estimate": base / tuned})
    return out


def test_a_slower_tuned_record_moves_to_the_defaults_and_the_run_says_so():
    kept = rule.keep_baseline(record(25.0, 31.2, "slower"))
    assert kept["chosen"] == [] and len(kept["defaults"]) == 1
    entry = kept["defaults"][0]
    assert entry["task"] == "main" and entry["trial"] == 76 and entry["default_wins"] is True
    assert (entry["default_us"], entry["measured_us"], entry["default"]) == (25.0, 31.2, "dlight")
    assert kept["kept"] == {"program": "dlight", "text": "DLight's default kept: tuned 31.2 µs vs DLight 25.0 µs"}
    assert rule.dlight_kept(kept) == kept["kept"]
    # what the export and a model build take: nothing of the lost record is applied
    applied, won = rule.split(kept["chosen"] + kept["defaults"])
    assert applied == [] and [w["task"] for w in won] == ["main"]
    assert headline(kept)["kept"] == "baseline"


def test_a_faster_tuned_record_is_kept_unchanged():
    faster = record(25.0, 14.8, "faster")
    assert rule.keep_baseline(faster) is faster and rule.dlight_kept(faster) is None
    assert rule.kept_text(faster) is None and headline(faster)["kept"] == "tuned"


def test_a_tie_keeps_the_faster_median_like_a_models_default():
    # no measurable difference, but DLight's median is lower: the faster program is kept, as on a CPU
    tie = record(100.0, 100.5, "same")
    assert rule.baseline_wins(tie) and rule.default_wins(100.0, 100.5)
    assert rule.keep_baseline(tie)["kept"]["text"] == "DLight's default kept: tuned 100.5 µs vs DLight 100.0 µs"
    assert not rule.baseline_wins(record(100.5, 100.0, "same"))


def test_nothing_tuned_or_nothing_measured_changes_nothing():
    untuned_only = record(25.0, None, "")
    assert rule.keep_baseline(untuned_only) is untuned_only
    assert rule.keep_baseline({}) == {} and rule.dlight_kept(None) is None


def test_long_latencies_read_in_ms():
    assert rule.kept_text(record(1500.0, 2250.0, "slower")) == "DLight's default kept: tuned 2.250 ms vs DLight 1.500 ms"


def test_the_tune_summary_says_dlight_was_kept():
    """What ``asight tune`` prints after a GPU run whose tuned record lost (commands/tune.headline_lines),
    on a record of interleaved rounds (the harness's shape) with DLight at 25 µs and tuned at 31 µs."""
    from asight_lsp.analysis.gpu_headline import headline as gpu_headline
    from asight_lsp.commands.tune import headline_lines
    from asight_lsp.store.runs import RunMeta
    from tests.conftest import measured
    record = {**measured(25.0, 31.0), "baseline": DLIGHT, "chosen": [dict(c) for c in CHOSEN], "defaults": [],
              "vendor": {"note": "PyTorch is not installed (no cuBLAS/cuDNN reference)"}}
    record = rule.keep_baseline(record)
    record["gpu"] = gpu_headline(record)
    lines = headline_lines(RunMeta(id="r", file="f.py", function="main", kind="tir", measurement=record))
    gpu = [line for line in lines if line.startswith("gpu      ") or line.startswith("         DLight")]
    assert gpu[0].startswith("gpu      tuned 31.0 µs vs DLight's default schedule 25.0 µs: 0.81× — SLOWER than")
    assert any(line.strip().startswith("DLight's default kept: tuned 31.0 µs vs DLight 25.0 µs (tuning lost")
               for line in lines)
    assert record["chosen"] == [] and record["defaults"][0]["trial"] == 76


def test_the_result_line_leads_with_dlights_figure_when_dlight_is_kept():
    from asight_lsp.views.text import headline_text, result_parts
    kept = rule.keep_baseline(record(120.0, 140.0, "slower"))
    assert result_parts(kept) == ["0.12 ms DLight kept", "tuned 0.14 ms, 1.17× slower"]
    assert headline_text(kept) == "0.12 ms DLight kept · tuned 0.14 ms, 1.17× slower"
    faster = record(25.0, 14.8, "faster")
    assert result_parts(faster) == ["15 µs", "1.69× vs DLight"]
