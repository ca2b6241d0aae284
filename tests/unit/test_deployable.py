"""The deployable build in words (``analysis/deployable.py``, pure): which build a headline measured
and when it turns stale, the refusal of an export with untuned kernels, and the verdict on the
exported library against the headline's build."""
from __future__ import annotations

import pytest

from asight_lsp.services.catalogue import RunView
from asight_lsp.analysis.deployable import (EXPORT_TOLERANCE, export_verdict, headline_build, missing_lines,
                                            refusal_text)


def test_headline_build_names_the_build_and_turns_stale():
    build = {"deployable": True, "bound": 12, "weights_digest": "abc"}
    assert headline_build(build, "abc") == {"deployable": True, "stale": False,
                                            "text": "deployable build (weights bound, as `asight export` builds it)"}
    changed = headline_build(build, "def")
    assert changed["stale"] and "weights file changed" in changed["text"]
    old = headline_build(None, "abc")             # a run from before the deployable build, weights beside
    assert not old["deployable"] and old["stale"] and "NOT the exported build" in old["text"]
    assert headline_build(None, None) == {"deployable": True, "stale": False,
                                          "text": "deployable build (no weights file to bind)"}
    assert headline_build({"deployable": True, "weights_digest": None}, None)["stale"] is False


def test_refusal_names_each_kernel_with_its_cost_and_the_two_ways_out():
    applied = {"kernels": 11, "missing": ["fused_matmul1_multiply", "fused_ffn"],
               "missing_cost": [{"kernel": "fused_ffn", "calls": 1, "us": 3500.0, "share": 0.5},
                                {"kernel": "fused_matmul1_multiply", "calls": 2, "us": 120.0, "share": 0.02}]}
    assert missing_lines(applied) == ["fused_matmul1_multiply: 120.0 µs per run (2 calls, 2% of the kernel time)",
                                      "fused_ffn: 3.500 ms per run (1 call, 50% of the kernel time)"]
    text = refusal_text(applied)
    assert text.startswith("2 of 11 kernels of the deployable build have no record")
    assert "--tune-missing N" in text and "--allow-untuned" in text and "nothing written" in text


def _record(low: float, high: float, estimate: float) -> dict:
    return {"speedup": {"estimate": estimate, "ci": [low, high]}}


def test_export_verdict_is_an_error_beyond_the_interval_and_the_band():
    assert export_verdict(_record(0.93, 1.05, 0.99))["ok"]
    assert export_verdict(_record(0.70, 1.40, 1.1))["ok"]            # wide interval: no measurable difference
    slower = export_verdict(_record(0.014, 0.017, 0.0155))           # issue 24: 1.1 ms headline, 70 ms library
    assert not slower["ok"] and slower["direction"] == "slower" and "SLOWER" in slower["text"]
    assert not export_verdict(_record(1.3, 1.5, 1.4))["ok"]          # faster for no reason: not this build
    assert export_verdict(_record(1.3, 1.5, 1.4), tuned_at_export=True)["ok"]
    edge = 1 + EXPORT_TOLERANCE
    assert export_verdict(_record(edge * 0.99, 2.0, 1.5))["ok"] and not export_verdict(_record(edge * 1.01, 2.0, 1.5))["ok"]
    assert not export_verdict({})["ok"]


def test_lens_and_tune_summary_name_the_headline_build(tmp_path):
    """A model run's lens and `asight tune` summary say whether the headline is of the deployable
    build, and warn once the exported build would differ (a run from before, or new weights)."""
    import numpy as np
    from tests.conftest import measured
    from asight_lsp.commands.tune import build_lines
    from asight_lsp.server.lens import result_lens_title, result_lens_tooltip
    from asight_lsp.services.results import FunctionResult
    from asight_lsp.store.runs import RunMeta
    from asight_lsp.engine.wire import weights_digest
    script = tmp_path / "m_relax.py"
    script.write_text("")
    np.savez(tmp_path / "m_relax.weights.npz", w=np.ones(3, "float32"))
    digest = weights_digest(str(tmp_path / "m_relax.weights.npz"))
    meta = RunMeta(id="r", file=str(script), function="main", state="done", trials_done=8, trials_requested=8,
                   measurement=measured(2000.0, 100.0), kind="relax",
                   extra={"build": {"deployable": True, "bound": 1, "weights_digest": digest}})
    result = FunctionResult("Module.main", RunView(meta, tmp_path, "fresh"))
    assert " · deployable build · 8 trials" in result_lens_title(result)
    assert "Build: deployable build (weights bound" in result_lens_tooltip(result)
    assert build_lines(meta) == ["         build: deployable build (weights bound, as `asight export` builds it)"]
    meta.extra = {}                                                        # a run from before issue 24
    assert "⚠ not the exported build" in result_lens_title(result)
    assert build_lines(meta)[0].startswith("         build: !!! weights as parameters, NOT the exported build")
    meta.extra = {"build": {"deployable": True, "bound": 1, "weights_digest": digest}}
    np.savez(tmp_path / "m_relax.weights.npz", w=np.zeros(3, "float32"))   # other values: other kernels
    assert "⚠ not the exported build" in result_lens_title(result)
    meta.kind = "tir"
    assert build_lines(meta) == [] and "build" not in result_lens_title(result)


def test_tune_summary_says_which_kernels_have_no_record():
    from asight_lsp.analysis.deployable import unrecorded_text
    assert unrecorded_text(["a", "b"], [{"task": "a"}, {"task": "b"}]) is None
    text = unrecorded_text(["a", "softmax", "layer_norm"], [{"task": "a"}])
    assert text.startswith("2 of 3 kernels have no record (default schedule): softmax, layer_norm")
    assert "--tune-missing N" in text


def test_a_short_tune_missing_is_said_in_the_summary_and_a_full_one_is_not():
    from asight_lsp.analysis.shortfall import summarise
    from asight_lsp.services.export import export_summary, tuned_missing_text
    short = summarise(6, 2, 0, [], [{"task": "fused_concatenate", "why": "repeats", "proposed": 2}], {})
    reply = {"status": "refused", "message": "1 of 9 kernels of the deployable build have no record",
             "tuned_missing": {"kernels": ["fused_concatenate"], "trials": 6, "shortfall": short}}
    text = tuned_missing_text(reply)
    assert text.startswith("tuning the 1 missing kernel (fused_concatenate) measured 2 of 6 trials: "), text
    assert "4 never proposed" in text and "already measured" in text      # why: the search ran out
    assert export_summary(reply).endswith(f"({text})")
    full = {**reply, "tuned_missing": {"kernels": ["fused_concatenate"], "trials": 6, "shortfall": None}}
    assert tuned_missing_text(full) == "" and tuned_missing_text({}) == ""


def test_the_untuned_build_is_exported_only_when_measured_faster():
    from asight_lsp.analysis.deployable import untuned_wins
    slower = {"speedup": {"estimate": 0.58, "ci": [0.47, 0.65]}}
    why = untuned_wins(slower)
    assert why.startswith("the run measured the tuned build 1.72x slower than the untuned one (95% CI 1.54-2.13x)")
    assert "--tuned" in why
    assert untuned_wins({"speedup": {"estimate": 0.9, "ci": [0.8, 1.02]}}) is None     # not measurably slower
    assert untuned_wins({"speedup": {"estimate": 41.0, "ci": [40.0, 42.0]}}) is None
    assert untuned_wins(None) is None and untuned_wins({}) is None
    assert untuned_wins({**slower, "load": {"busy": True}}) is None                    # one noisy headline is not enough
    assert export_verdict({"speedup": {"estimate": 1.6, "ci": [1.5, 1.7]}}, untuned=True)["ok"]
    assert not export_verdict({"speedup": {"estimate": 1.6, "ci": [1.5, 1.7]}})["ok"]   # unexpected otherwise


def test_a_model_without_weights_is_never_stale():
    """A model with no weights: its import writes an empty weights file, the run binds nothing and
    records no digest; "the weights file changed since tuning, re-tune" was printed forever."""
    none_bound = {"deployable": True, "weights": None, "bound": 0, "weights_digest": None}
    assert headline_build(none_bound, "e3b0c442") == {"deployable": True, "stale": False,
                                                      "text": "deployable build (no weights file to bind)"}
    assert headline_build({**none_bound, "bound": 2, "weights_digest": "abc"}, "e3b0c442")["stale"]


def test_a_busy_slower_headline_is_said_at_export_not_acted_on():
    """Tune said "keep the untuned build" from a busy record; export shipped the tuned build without a
    word (model probe round 5).  It still ships it, and now says why and how to get the other."""
    from asight_lsp.analysis.deployable import untuned_faster_but_busy, untuned_wins
    busy = {"speedup": {"estimate": 1 / 1.2, "ci": [0.82, 0.84]}, "load": {"busy": True}}
    assert untuned_wins(busy) is None
    note = untuned_faster_but_busy(busy)
    assert "1.20x slower" in note and "busy" in note and "--untuned" in note and "--remeasure" in note
    assert untuned_faster_but_busy({**busy, "load": {"busy": False}}) is None      # acted on instead
    assert untuned_faster_but_busy({"speedup": {"estimate": 1.3, "ci": [1.2, 1.4]}, "load": {"busy": True}}) is None


def test_export_names_a_library_file_the_loader_can_read(tmp_path):
    """`export -o model.txt` wrote the file, then failed in TVM's loader and left it behind (model probe)."""
    from types import SimpleNamespace
    from asight_lsp.errors import AsightError
    from asight_lsp.services.export import require_exportable
    found = SimpleNamespace(records=lambda: [1])
    meta = SimpleNamespace(id="r", state="done", kind="relax", error=None)
    require_exportable(found, meta, str(tmp_path / "model.so"))
    with pytest.raises(AsightError, match="name the library file model.so"):
        require_exportable(found, meta, str(tmp_path / "model.txt"))
    with pytest.raises(AsightError, match="is a directory"):
        require_exportable(found, meta, str(tmp_path))


def test_the_search_gets_credit_only_for_kernels_on_a_tuned_schedule():
    from asight_lsp.analysis.deployable import search_credit
    assert search_credit(11, None) is None and search_credit(0, []) is None
    none = search_credit(11, [])
    assert none.startswith("0 of 11 kernels run a tuned schedule") and "not the search" in none
    assert search_credit(5, [{"task": "a"}, {"task": "b"}]) == "2 of 5 kernels run a tuned schedule"


@pytest.mark.parametrize("target, level", [({"kind": "llvm"}, "asm shows a PrimFunc's machine code"),
                                           ({"kind": "cuda", "arch": "sm_90a"}, "cuda shows its kernel's CUDA source")])
def test_exporting_a_tir_run_points_to_the_code_level_of_its_target(target, level):
    """Outside probe 3, F9: an adopted H100 run's export pointed to `--level asm`, a level it refuses."""
    from types import SimpleNamespace
    from asight_lsp.errors import AsightError
    from asight_lsp.services.export import require_exportable
    meta = SimpleNamespace(id="r", state="done", kind="tir", error=None, function="Matmul1024.main", target=target)
    with pytest.raises(AsightError, match=rf"^run r tuned the TIR function Matmul1024.main, not a Relax model: export "
                                          rf"builds models \(asight code --level {level}\)$"):
        require_exportable(SimpleNamespace(records=lambda: [1]), meta, "m.so")
