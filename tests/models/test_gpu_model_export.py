"""A model tuned for a GPU elsewhere, exported here where there is none (issue 20, item 7): `asight
export` builds the library for the run's CUDA target with the run's records and DLight for the rest,
writes it, and says it was not loaded, checked or timed; the load snippet puts the inputs on the GPU.
The run is made as a GPU box would leave it: a real tuning job on this CPU for its files, then its
target and database replaced by the H100 tag and MetaSchedule design-space samples of the model's GPU
kernels (records as a GPU tuning run commits them; their times are test inputs)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models.matmul_model import write_model

pytestmark = [pytest.mark.tvm, pytest.mark.slow]


def gpu_run(store: Path, script: Path, meta, skip: tuple = ()) -> None:
    """The tuned run ``meta`` rewritten as a run tuned for the H100: target and GPU records (none for
    the kernels in ``skip``)."""
    from asight_lsp.store.runs import RunStore
    from asight_lsp.worker.compat import ms, parse_script, tvm
    from asight_lsp.worker.metaschedule import target_json
    from asight_lsp.worker.relax_pipeline import deployable, fuse
    from asight_lsp.worker.intrinsics import prepare
    target = tvm.target.Target("nvidia/nvidia-h100")
    prepare(target)    # the CUDA tensor intrinsics as the product registers them (its TuneContexts need them)
    text = "\n".join("" if line.startswith("from ") else line for line in script.read_text().splitlines())
    parsed = parse_script(text, aliases={"I": "I", "R": "R"})
    mod = deployable(parsed, "main", str(script).replace(".py", ".weights.npz"))[0]
    run = RunStore(str(store)).get(meta.id)
    for old in run.path.glob("database_*.json"):
        old.unlink()
    database = ms.database.JSONDatabase(work_dir=str(run.path))
    for k, task in enumerate(ms.relax_integration.extract_tasks(fuse(mod, target, off=frozenset()), target)):
        if task.task_name in skip:
            continue
        kernel = task.dispatched[0]
        sample = ms.TuneContext(mod=kernel, target=target, space_generator="post-order-apply",
                                search_strategy="replay-trace", num_threads=1, rand_state=0).generate_design_space()[0]
        database.commit_tuning_record(ms.database.TuningRecord(
            sample.trace, database.commit_workload(kernel), [1e-6 * (k + 1)], target,
            ms.arg_info.ArgInfo.from_prim_func(kernel["main"])))
    data = run.load()
    data.target, data.measurement = target_json(target), None
    run.save(data)


def test_a_model_tuned_for_a_gpu_exports_here_and_says_it_was_not_checked(tmp_path, monkeypatch):
    from asight_lsp.services.tuning import TuneRequest, start_tune
    script = write_model(tmp_path, "m", "(4,)", ["lv1: R.Tensor((4, 32), dtype=\"float32\") = R.nn.relu(lv)",
                                                 "gv: R.Tensor((4,), dtype=\"float32\") = R.sum(lv1, axis=[1])"])
    store = tmp_path / "store"
    monkeypatch.setenv("ASIGHT_TRIALS_PER_ITER", "1")
    meta = start_tune(TuneRequest(file=str(script), function=None, trials=2, store_root=str(store), seed=0)).wait(600)
    assert meta.state == "done", meta.error
    gpu_run(store, script, meta)

    lib = tmp_path / "m_gpu.so"
    out = subprocess.run([sys.executable, "-m", "asight_lsp", "export", str(script), "-o", str(lib),
                          "--work-dir", str(store), "--json"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["status"] == "written" and lib.stat().st_size == reply["bytes"] > 0
    assert reply["device"] == "cuda" and "cuda" in reply["target"]
    assert sorted(reply["applied"]["from_records"]) == ["fused_matmul_relu", "sum"] and reply["applied"]["missing"] == []
    assert reply["check"] == {"ok": None, "skipped": "this machine has no cuda device: the library was written, "
                                                     "not loaded, checked or timed (run it where the GPU is)"}
    assert "measured" not in reply
    assert "dev = tvm.cuda()" in reply["load"] and reply["outputs"] == [{"shape": [4], "dtype": "float32"}]
    assert reply["load"].endswith("# a tvm Tensor (4,) float32: out.numpy()")
    # what the GPU machine needs to load it (outside probe F7): the library holds CUDA C, no PTX or cubin
    data = lib.read_bytes()
    assert b"__global__" in data and b".target sm_" not in data
    assert reply["device_code"].startswith("the kernels are CUDA C in the library (TVM 0.27 keeps them as source)")
    text = subprocess.run([sys.executable, "-m", "asight_lsp", "export", str(script), "-o", str(lib),
                           "--work-dir", str(store)], capture_output=True, text=True, timeout=900)
    assert text.returncode == 0 and "outputs: not checked: this machine has no cuda device" in text.stdout
    assert "  note: the kernels are CUDA C in the library" in text.stdout
    assert "NOT the exported build" not in text.stdout
    # each task's kernel in the code view without the GPU (outside probe 2, F6: "profiling measures on this CPU")
    code = subprocess.run([sys.executable, "-m", "asight_lsp", "code", str(script), "--work-dir", str(store), "--task",
                           "fused_matmul_relu", "--level", "cuda"], capture_output=True, text=True, timeout=900)
    assert code.returncode == 0 and "__global__" in code.stdout, code.stderr
    # a kernel without a record cannot be tuned here: said at once (it sampled, built, and then blamed
    # "every sampled schedule was rejected" on the design space: outside probe 2026-11-29)
    gpu_run(store, script, meta, skip=("sum",))
    missing = subprocess.run([sys.executable, "-m", "asight_lsp", "export", str(script), "-o", str(lib), "--work-dir",
                              str(store), "--tune-missing", "4"], capture_output=True, text=True, timeout=900)
    assert missing.returncode != 0 and "no cuda device to tune the missing kernels on" in missing.stderr

