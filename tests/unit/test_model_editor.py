"""The editor's model path, TVM-free parts: run summaries name a Relax run's tasks (the task pickers
and selectors read them), the Model lens appears only for an ended Relax run, and the export's
one-paragraph summary says what was built, applied, bound and checked."""
from __future__ import annotations

import time
from pathlib import Path

from asight_lsp import protocol as P
from asight_lsp.server.lens import model_lens, result_lenses
from asight_lsp.services.export import default_output, export_summary, load_snippet
from asight_lsp.services.results import FunctionResult
from asight_lsp.services.catalogue import RunView
from asight_lsp.store.runs import RunMeta
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.views.runs import run_summary

TASKS = [{"name": "fused_conv2d_add_relu", "weight": 1.0}, {"name": "mean", "weight": 1.0}, {"weight": 2.0}]
SOURCE = '''from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            y = R.nn.relu(x)
            R.output(y)
        return y
'''


def _meta(kind: str, state: str = "done") -> RunMeta:
    return RunMeta(id="r1", file="m.py", function="Module", state=state, kind=kind, tasks=TASKS, trials_done=9,
                   trials_requested=9, best_us=40.0, baseline_us=25.0, finished=time.time() - 60)


def test_run_summary_names_a_relax_runs_tasks_only():
    relax = run_summary(_meta("relax"))
    assert relax["kind"] == "relax" and relax["tasks"] == ["fused_conv2d_add_relu", "mean"]
    tir = run_summary(_meta("tir"))
    assert tir["kind"] == "tir" and "tasks" not in tir
    assert set(relax) <= set(P.RunSummary.__annotations__)


def test_model_lens_only_for_an_ended_relax_run():
    fn = next(f for f in build_outline(SOURCE, "m.py").functions if f.kind == "relax_function")
    done = FunctionResult(fn.id, RunView(_meta("relax"), Path("."), "fresh"))
    lens = model_lens("file:///m.py", fn, done, 5)
    assert lens == (5, "Model", P.CMD_SHOW_MODEL, {"uri": "file:///m.py", "function": fn.id, "run": "r1"})
    assert lens in result_lenses("file:///m.py", fn, done, 5)
    assert model_lens("file:///m.py", fn, FunctionResult(fn.id, RunView(_meta("tir"), Path("."), "fresh")), 5) is None
    assert model_lens("file:///m.py", fn, FunctionResult(fn.id, RunView(_meta("relax", "failed"), Path("."), "fresh")), 5) is None


REPLY = {"library": "/w/m.so", "bytes": 1000, "run": "r1", "weights": "/w/m.weights.npz", "bound_weights": 12,
         "applied": {"from_records": ["a", "b"], "kernels": 4, "missing": ["c"], "folded": ["transpose"], "default": ["c"]},
         "check": {"ok": True, "rtol": 1e-3}, "function": "main",
         "inputs": [{"name": "input", "shape": [1, 3, 8, 8], "dtype": "float32"}]}


def test_export_summary_says_built_applied_bound_and_checked():
    text = export_summary(REPLY)
    assert text.startswith("wrote /w/m.so · 2 of 4 kernels from run r1's records; NOT TUNED (TVM's default schedule, "
                           "accepted with --allow-untuned): c")
    assert "folded into constants with the weights: transpose" in text
    assert "12 weights bound from m.weights.npz" in text and text.endswith("outputs match the untuned build")
    bad = export_summary({**REPLY, "bound_weights": 0, "check": {"ok": False}})
    assert "no weights file beside the model" in bad and bad.endswith("outputs DIFFER from the untuned build")


def test_default_output_and_load_snippet():
    assert default_output("/w/models/tiny_relax.py") == "/w/models/tiny_relax.so"
    snippet = load_snippet(REPLY)
    assert 'tvm.runtime.load_module("/w/m.so")' in snippet and 'np.zeros((1, 3, 8, 8), "float32")' in snippet
    assert "# your input: this shape exactly (the library is built for it; re-import with --shape" in snippet
    # the thread count is set before TVM is imported, as the headline measured it (TVM may default to one)
    threads = load_snippet({**REPLY, "headline": {"threads": 7}})
    assert threads.index('os.environ.setdefault("TVM_NUM_THREADS", "7")') < threads.index("import numpy as np, tvm")
    assert "default to one thread" in threads
    compile(snippet, "snippet", "exec")


def test_a_models_lens_line_is_short():
    """Issue 23: the model's lens line is one short lens, its latency (⚠ when noisy), that fits an
    editor beside the Explorer and two panels at 1000 px; its quick pick holds the rest, the first item
    Model with the full headline; trials and how it was measured in the tooltip."""
    import dataclasses
    from pathlib import Path
    from asight_lsp import protocol as P
    from asight_lsp.server.lens import is_model, model_lenses
    from asight_lsp.services.results import FunctionResult
    from asight_lsp.store.runs import RunMeta
    from asight_lsp.tvmscript.outline import build_outline
    from tests.conftest import measured
    text = ("@I.ir_module\nclass Module:\n    @R.function\n    def main(x: R.Tensor((4,), dtype=\"float32\")):\n"
            "        with R.dataflow():\n            y: R.Tensor((4,), dtype=\"float32\") = R.nn.relu(x)\n"
            "            R.output(y)\n        return y\n")
    fn = build_outline(text, "m.py").function("Module.main")
    record = {**measured(40.0, 20.0, busy=True, by="the editor's Re-measure"), "taken": 1795674078.0}
    meta = RunMeta(id="Module-1", file="m.py", function="Module", state="done", trials_done=512, kind="relax",
                   measurement=record)
    result = FunctionResult(fn.id, RunView(meta, Path("."), "fresh"))
    assert is_model(fn, result)
    [(l1, title, cmd, items, tip)] = model_lenses("file:///m.py", fn, result, 2)
    assert title == "20 µs ⚠" and tip.startswith("ASight, the model end to end") and cmd == P.CLIENT_CMD_MORE
    assert "512 trials" in tip and "busy" in tip and "noisy" in tip
    assert [i["label"] for i in items["items"]] == ["Model", "▶ Tune", "Profile", "Re-measure", "Scheduled code",
                                                     "Stage graph", "Hotspots", "Search space", "Loop view"]
    model = items["items"][0]
    # which measurement the lens shows: when, by what, under which load (tooltip and the pick's Model entry)
    which = "UTC by the editor's Re-measure, busy (other processes 0.90 cores)"
    assert model["command"] == P.CMD_SHOW_MODEL and model["detail"].startswith("20 µs · 2.0× faster · noisy · measured ")
    assert which in model["detail"], model["detail"]
    assert "Shows the measurement of " in tip and "UTC (the editor's Re-measure, busy (other processes 0.90 cores))" in tip, tip
    assert "20 µs · 2.0× faster · noisy" in items["title"] and "512 trials" in items["title"]
    quiet = FunctionResult(fn.id, RunView(dataclasses.replace(meta, measurement=measured(40.0, 20.0)), Path("."), "fresh"))
    assert model_lenses("file:///m.py", fn, quiet, 2)[0][1] == "20 µs"
    remeasure = next(i for i in items["items"] if i["label"] == "Re-measure")
    assert remeasure["command"] == P.CMD_PROFILE and remeasure["argument"]["remeasure"] is True
    on_gpu = FunctionResult(fn.id, RunView(dataclasses.replace(meta, target={"kind": "cuda"}), Path("."), "fresh"))
    labels = [i["label"] for i in model_lenses("file:///m.py", fn, on_gpu, 2)[0][3]["items"]]
    assert labels == ["Model", "▶ Tune", "Scheduled code", "Stage graph", "Search space", "Loop view"]


def test_every_run_summary_says_which_measurement_it_shows():
    """Issue 23: a run's summary (asight/runs, runUpdated, every run payload) names its measurement record,
    so a client can tell that a panel shows an older one; none before the run is measured."""
    from tests.conftest import measured
    from asight_lsp.views.measured import measurement_stamp
    record = {**measured(40.0, 20.0, busy=True, by="the editor's Re-measure"), "taken": 1795674078.0}
    meta = RunMeta(id="r1", file="m.py", function="Module", state="done", kind="relax", measurement=record)
    stamp = run_summary(meta)["measurement"]
    assert stamp == measurement_stamp(record) and stamp["taken"] == 1795674078.0 and stamp["busy"] is True
    assert stamp["text"].startswith("measured ") and "UTC by the editor's Re-measure, busy (other processes 0.90 cores)" in stamp["text"]
    assert run_summary(_meta("relax"))["measurement"] is None                    # not measured yet
    assert set(run_summary(meta)) <= set(P.RunSummary.__annotations__)          # the protocol names it


def test_a_model_built_for_a_gpu_without_one_here_says_it_was_not_checked():
    from asight_lsp.services.export import export_ok
    skipped = {**REPLY, "device": "cuda",
               "check": {"ok": None, "skipped": "this machine has no cuda device: the library was written, not loaded"}}
    assert export_summary(skipped).endswith("not checked: this machine has no cuda device: the library was written, "
                                            "not loaded")
    assert export_ok({**skipped, "status": "written"})
    snippet = load_snippet(skipped)
    assert "dev = tvm.cuda()" in snippet and '"float32"), dev)' in snippet
    # the kernels are compiled when the library is loaded (outside probe F7); no CPU thread count
    assert '# os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"' in snippet and "TVM_NUM_THREADS" not in snippet
    assert export_summary({**skipped, "device_code": "the kernels are CUDA C"}).endswith(" · the kernels are CUDA C")
    assert "dev = tvm.cpu()" in load_snippet(REPLY)
    compile(snippet, "snippet", "exec")


def test_the_load_snippet_says_what_the_call_returns():
    from asight_lsp.services.export import returns_text
    one = load_snippet({**REPLY, "outputs": [{"shape": [1, 10], "dtype": "float32"}]})
    assert one.endswith('out = vm["main"](input)  # a tvm Tensor (1, 10) float32: out.numpy()')
    two = returns_text([{"shape": [4, 3], "dtype": "float32"}, {"shape": [4, 3], "dtype": "int32"}, {"tuple": 2}])
    assert two == "a tuple of 3: out[0] (4, 3) float32, out[1] (4, 3) int32, out[2] a tuple of 2; out[i].numpy()"
    assert returns_text([{"tuple": 1}]).startswith("a tuple of 1: out[0] a tuple of 1")
