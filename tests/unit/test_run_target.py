"""A hand-edited run.json: its fields are what asight writes, and a finished run's target is its
records' (outside probe 3, F8: ``"target": 42`` reached the user as "'int' object has no attribute
'strip'"; ``"llvm"`` over records tuned for cuda made ``asight profile`` time the GPU trace on the CPU)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from asight_lsp.errors import AsightError
from asight_lsp.services.lookup import prepare_run
from asight_lsp.store.database import require_records_target
from asight_lsp.store.runs import Run

MBR = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "mbr128"     # 40 records tuned for llvm


@pytest.fixture
def run(tmp_path) -> Run:
    shutil.copytree(MBR, tmp_path / "mbr128")
    return Run(tmp_path / "mbr128")


def edit(run: Run, **fields) -> None:
    data = json.loads(run.meta_path.read_text())
    data.update(fields)
    run.meta_path.write_text(json.dumps(data))


@pytest.mark.parametrize("field, value", [("target", 42), ("target", {"kind": 5}), ("target", ""),
                                          ("target", ["llvm"]), ("trials_done", "3"), ("trials_done", True),
                                          ("state", None), ("tasks", {}), ("best_us", "fast"), ("file", 7)])
def test_a_field_asight_never_writes_makes_run_json_unreadable_in_one_line(run, field, value):
    edit(run, **{field: value})
    with pytest.raises(AsightError, match=rf"run mbr128: run.json is unreadable \(its {field} ") as err:
        run.load()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("target", [{"kind": "llvm", "mcpu": "skylake-avx512"}, "llvm -mcpu=znver3",
                                    "nvidia/nvidia-h100", None])
def test_a_target_asight_can_read_loads(run, target):
    edit(run, target=target)
    assert run.load().target == target


@pytest.mark.parametrize("target, said", [({"kind": "cuda", "arch": "sm_90a"}, "cuda"), ("cuda", "cuda"),
                                          ({"kind": "rocm"}, "rocm")])
def test_a_finished_run_whose_target_is_not_its_records_is_refused(run, target, said):
    edit(run, target=target)
    with pytest.raises(AsightError, match=f"run.json says target {said}, but its records were tuned for llvm"):
        prepare_run(run)


def test_a_running_run_or_a_tag_is_not_compared_and_the_records_own_kind_passes(run):
    edit(run, target={"kind": "cuda"}, state="running")
    require_records_target(run, run.load())
    edit(run, target="nvidia/nvidia-h100", state="done")       # a tag: TVM's to read
    require_records_target(run, run.load())
    edit(run, target="llvm -mcpu=znver3")
    assert prepare_run(run).target == "llvm -mcpu=znver3"


def test_no_target_named_is_the_host_cpu_of_llvm_records_not_of_gpu_records(run):
    """A run.json without a target (as tests and older runs write it) over llvm records is the host's;
    over cuda records it would time the GPU trace on this CPU."""
    edit(run, target=None)
    assert prepare_run(run).target is None
    rows = [json.loads(line) for line in (run.path / "database_tuning_record.json").read_text().splitlines()]
    for row in rows:
        row[1][2] = {"kind": "cuda", "arch": "sm_90a"}
    (run.path / "database_tuning_record.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(AsightError, match="run.json says target none, but its records were tuned for cuda"):
        prepare_run(run)
