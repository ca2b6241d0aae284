"""Views of adopted and module runs agree with what the run is (outside probe 10): a second kernel in
the work folder, a hand-edited extra.adopted, one function of a module run."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from asight_lsp.services.catalogue import RunView
from asight_lsp.errors import AsightError
from asight_lsp.store.index import RunIndex
from asight_lsp.store.runs import Run, read_records

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _two_workload_run(tmp_path) -> Run:
    """mbr128 with its workload listed twice (a second kernel's records at half the time) and adopted
    as workload 0."""
    run_dir = tmp_path / ".asight" / "runs" / "r"
    shutil.copytree(FIXTURES / "runs" / "mbr128", run_dir)
    workloads = (run_dir / "database_workload.json").read_text()
    row = json.loads(workloads)
    (run_dir / "database_workload.json").write_text(workloads + json.dumps(["1" + row[0], row[1]]) + "\n")
    lines = (run_dir / "database_tuning_record.json").read_text().splitlines()
    other = []
    for line in lines:
        rec = json.loads(line)
        rec[0], rec[1][1] = 1, [s / 2 for s in rec[1][1]]
        other.append(json.dumps(rec))
    (run_dir / "database_tuning_record.json").write_text("\n".join(lines + other) + "\n")
    run = Run(run_dir)
    meta = run.load()
    meta.measurement, meta.extra["adopted"] = None, {"workload": 0, "flops": None, "dtypes": ["float32"]}
    run.save(meta)
    return run


def test_an_adopted_runs_best_is_its_adopted_workloads_in_a_folder_of_two_kernels(tmp_path):
    """F1: by block names the index could not tell the two workloads apart, and the hover lost its
    best schedule and GPU words; F2: the code view's best comes from the same workload."""
    from asight_lsp.services.codeview import adopted_best
    run = _two_workload_run(tmp_path)
    records = read_records(run.path)
    own = min(r["latency_us"] for r in records if r["workload"] == 0 and r["latency_us"] is not None)
    best = RunIndex(tmp_path / ".asight", min_interval=0).best_record("r")
    assert best["workload"] == 0 and best["latency_us"] == pytest.approx(own)
    assert adopted_best(run.load(), records)["workload"] == 0
    assert adopted_best(run.load(), records)["latency_us"] == pytest.approx(own)


def test_an_extra_adopted_that_is_not_adopts_is_refused_in_one_line(tmp_path):
    """F3: "adopted": "yes" in run.json made `space`/`loops` an internal error and every lens vanish."""
    run = _two_workload_run(tmp_path)
    data = json.loads(run.meta_path.read_text())
    data["extra"]["adopted"] = "yes"
    run.meta_path.write_text(json.dumps(data))
    with pytest.raises(AsightError, match=r"^run r: run.json is unreadable \(its extra.adopted is \"yes\", not what "
                                          r"`asight adopt` writes there"):
        run.load()


def test_a_module_runs_lens_over_one_function_shows_its_own_figure_and_names_the_modules():
    """F4: each PrimFunc's lens read "56 µs · 21× vs untuned", the module's sum, as its own."""
    from asight_lsp.server.lens import result_lens_title
    from asight_lsp.services.results import FunctionResult
    from asight_lsp.store.runs import RunMeta
    part = lambda us: {"median_us": us, "p25_us": us, "p75_us": us}  # noqa: E731
    record = {"scope": "module", "untuned": part(1166.0), "tuned": part(56.3),
              "speedup": {"estimate": 20.7, "ci": [20.0, 21.5]}, "verdict": "faster",
              "parts": {"untuned mm_square": part(62.0), "tuned mm_square": part(18.5)}}
    meta = RunMeta(id="m", file="/w/three_kernels.py", function="ThreeKernels", state="done", trials_done=24,
                   measurement=record, finished=time.time())
    title = lambda fid: result_lens_title(FunctionResult(fid, RunView(meta, Path("/w"), "fresh")))  # noqa: E731
    assert title("ThreeKernels.mm_square").startswith("18 µs · 3.4× vs untuned (medians) · module 56 µs · 24 trials")
    assert title("ThreeKernels").startswith("56 µs · 21× vs untuned · 24 trials")


def test_a_second_adopt_is_said_only_for_the_same_function(tmp_path):
    """Outside probe 12, F7: adopting the folder's other kernel said "… was adopted from this folder
    before: this is a second run of it", naming the first kernel's run."""
    from asight_lsp.services.adopt import adopted_before
    from asight_lsp.store.runs import RunStore
    run = _two_workload_run(tmp_path)
    folder = tmp_path / "work"
    shutil.copytree(run.path, folder)
    meta = run.load()
    meta.extra["adopted"].update({"from": str(folder), "from_size": (folder / "database_tuning_record.json").stat().st_size})
    run.save(meta)
    store = RunStore(tmp_path / ".asight")
    assert adopted_before(store, folder, meta.function) == "r"
    assert adopted_before(store, folder, "Other.main") is None
