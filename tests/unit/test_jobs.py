"""services/tuning.py and services/jobs.py without TVM: request validation, selection, resume keys, state repair, event polling."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asight_lsp.errors import AsightError, InputError
from asight_lsp.services import jobs, tuning
from asight_lsp.services.jobs import TuneJob, refresh_run
from asight_lsp.services.tuning import TuneRequest, start_tune
from asight_lsp.tvmscript.selection import select
from asight_lsp.store.runs import Run, RunMeta, RunStore
from asight_lsp.tvmscript.hashing import source_hash
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.hashing import function_text

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"

TWO_UNITS = '''from tvm.script import tirx as T
from tvm.script import ir as I


@T.prim_func(s_tir=True)
def first(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("copy"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]


@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("neg"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(-1)

    @T.prim_func(s_tir=True)
    def other(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("two"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
'''


def outline_of(text: str, path: str = "f.py"):
    return build_outline(text, path)


# --------------------------------------------------------------------------- selection


def test_select_only_unit_by_default():
    sel = select(outline_of((FIX / "matmul64.py").read_text()), None)
    assert (sel.unit.name, sel.member, sel.label) == ("matmul64", None, "matmul64")
    assert [f.id for f in sel.functions] == ["matmul64"]


def test_select_requires_func_when_several_units():
    with pytest.raises(AsightError, match=r"2 units \(first, Mod\); pick one with --func"):
        select(outline_of(TWO_UNITS), None)


def test_select_module_member_and_whole_module():
    outline = outline_of(TWO_UNITS)
    member = select(outline, "Mod.other")
    assert (member.unit.name, member.member, member.label) == ("Mod", "other", "Mod.other")
    assert [f.id for f in member.functions] == ["Mod.other"]
    whole = select(outline, "Mod")
    assert (whole.member, whole.label) == (None, "Mod")
    assert sorted(f.id for f in whole.functions) == ["Mod.main", "Mod.other"]
    assert select(outline, "other").label == "Mod.other"      # bare name when unique
    assert select(outline, "first").label == "first"


def test_select_relax_function_tunes_its_module():
    outline = outline_of((FIX / "relax_cnn.py").read_text())
    sel = select(outline, "main")
    assert (sel.unit.name, sel.member, sel.label) == ("Net", "main", "Net.main")


def test_unknown_function_lists_available():
    with pytest.raises(AsightError) as err:
        select(outline_of(TWO_UNITS), "nope")
    assert str(err.value) == "no function 'nope' in f.py; available: first, Mod.main, Mod.other, Mod"
    assert "\n" not in str(err.value)


def test_ambiguous_bare_name():
    module = TWO_UNITS[TWO_UNITS.index("@I.ir_module"):]
    text = TWO_UNITS + "\n\n" + module.replace("class Mod:", "class Mod2:")
    with pytest.raises(AsightError, match="ambiguous: Mod.main, Mod2.main; use the full id"):
        select(outline_of(text), "main")
    assert select(outline_of(text), "Mod2.main").unit.name == "Mod2"


# --------------------------------------------------------------------------- refusals before any job


@pytest.mark.parametrize("name", ["import_in_body.py", "lambda_call.py", "dunder_import.py", "namespace_escape.py"])
def test_hostile_files_are_refused_with_location(name, tmp_path):
    with pytest.raises(InputError) as err:
        start_tune(TuneRequest(file=str(FIX / "hostile" / name), store_root=str(tmp_path)))
    message = str(err.value)
    assert message.startswith(str(FIX / "hostile" / name) + ":") and "refusing to tune" in message
    assert "\n" not in message
    assert not (tmp_path / "runs").exists()           # nothing was created, no job spawned


def test_syntax_error_is_an_input_error(tmp_path):
    path = FIX / "broken" / "syntax_error.py"
    with pytest.raises(InputError, match=r"syntax_error.py:6:\d+: syntax error"):
        start_tune(TuneRequest(file=str(path), store_root=str(tmp_path)))


def test_other_units_syntax_error_does_not_block(tmp_path, monkeypatch):
    spawned = fake_spawn(monkeypatch)
    job = start_tune(TuneRequest(file=str(FIX / "broken" / "one_of_two_broken.py"), function="good",
                                 store_root=str(tmp_path), trials=8))
    assert spawned and job.run.load().function == "good"
    job.wait(10)


@pytest.mark.parametrize("target, message", [
    ("foo", "unknown target 'foo'"),
    ("{bad", "target JSON is not valid JSON"),
    ('{"mcpu": "znver3"}', 'target JSON needs a "kind"'),
    ("/tmp/target.json", "a file path is not a target; pass the Target JSON itself"),
    ("nvidia/does-not-exist", r"^unknown target tag 'nvidia/does-not-exist': TVM 0.27.0.post1 has no such tag"),
    ("nvidia/nvidia-h10", r"^unknown target tag 'nvidia/nvidia-h10': .* \(near: nvidia/nvidia-h100"),
    ("nvidia/nope -arch=sm_90", r"^unknown target tag 'nvidia/nope'"),
])
def test_bad_targets(target, message, tmp_path):
    with pytest.raises(AsightError, match=message):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), target=target, store_root=str(tmp_path)))


@pytest.mark.parametrize("rpc", ["localhost", "h:port:key", "h:9190:", ":9190:k"])
def test_bad_rpc(rpc, tmp_path):
    with pytest.raises(AsightError, match="--rpc expects HOST:PORT:KEY"):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), rpc=rpc, store_root=str(tmp_path)))


def test_bad_trials_and_missing_file(tmp_path):
    with pytest.raises(AsightError, match="--trials must be a positive number"):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), trials=0, store_root=str(tmp_path)))
    with pytest.raises(AsightError, match="no such file"):
        start_tune(TuneRequest(file=str(tmp_path / "missing.py"), store_root=str(tmp_path)))


def test_target_labels():
    host = tuning.host_label()
    assert host.startswith("host:") and host.endswith(f":{tuning._cores()}")
    assert tuning.check_target(None) == host == tuning.check_target("llvm") == tuning.check_target('{"kind": "llvm"}')
    assert tuning.check_target("llvm  -mcpu=skylake") == "llvm -mcpu=skylake"
    assert tuning.check_target('{"mcpu": "a", "kind": "llvm"}') == '{"kind":"llvm","mcpu":"a"}'
    assert tuning.check_target("cuda") == "cuda"
    assert tuning.check_target("nvidia/geforce-rtx-3080") == "nvidia/geforce-rtx-3080"


# --------------------------------------------------------------------------- runs: create, resume, repair


def fake_spawn(monkeypatch, script: str = "pass") -> list:
    """Replace the TVM job by a tiny Python process (records what was spawned)."""
    spawned = []

    def spawn(run):
        spawned.append(run.id)
        return subprocess.Popen([sys.executable, "-c", script], start_new_session=True)

    monkeypatch.setattr(tuning, "spawn", spawn)
    return spawned


def test_start_tune_writes_run_and_resumes(tmp_path, monkeypatch):
    fake_spawn(monkeypatch)
    src = tmp_path / "mm.py"
    src.write_text((FIX / "matmul64.py").read_text())
    req = TuneRequest(file=str(src), trials=8, store_root=str(tmp_path / "store"), seed=3)
    first = start_tune(req)
    meta = first.wait(10)
    assert meta.state == "failed" and "ended without finishing" in meta.error   # the fake job did nothing
    outline = build_outline(src.read_text())
    assert meta.source_hashes == {"matmul64": source_hash(function_text(src.read_text(), outline.functions[0]))}
    assert meta.extra["selection"] == {"unit": "matmul64", "member": None} and meta.extra["seed"] == 3
    assert first.run.source_path.read_text() == src.read_text()
    second = start_tune(TuneRequest(file=str(src), trials=16, store_root=str(tmp_path / "store")))
    second.wait(10)
    meta2 = second.run.load()
    assert second.run.path == first.run.path
    assert [s["resumed"] for s in meta2.sessions] == [False, True] and meta2.trials_requested == 16
    # a changed function body (or a fresh request) gets a new run
    src.write_text(src.read_text().replace("T.float32(0)", "T.float32(1)"))
    third = start_tune(TuneRequest(file=str(src), trials=8, store_root=str(tmp_path / "store")))
    third.wait(10)
    assert third.run.path != first.run.path
    fourth = start_tune(TuneRequest(file=str(src), trials=8, store_root=str(tmp_path / "store"), resume=False))
    fourth.wait(10)
    assert fourth.run.path not in (first.run.path, third.run.path)


def test_unsaved_text_is_tuned_and_snapshotted(tmp_path, monkeypatch):
    fake_spawn(monkeypatch)
    text = (FIX / "matmul64.py").read_text().replace("matmul64", "edited")
    job = start_tune(TuneRequest(file=str(FIX / "matmul64.py"), text=text, store_root=str(tmp_path)))
    job.wait(10)
    assert job.run.load().function == "edited" and job.run.source_path.read_text() == text


def test_changed_constant_is_a_new_run(tmp_path, monkeypatch):
    fake_spawn(monkeypatch)
    src = tmp_path / "mm.py"
    src.write_text((FIX / "matmul.py").read_text())
    first = start_tune(TuneRequest(file=str(src), store_root=str(tmp_path)))
    first.wait(10)
    src.write_text(src.read_text().replace("N = 256", "N = 128"))
    second = start_tune(TuneRequest(file=str(src), store_root=str(tmp_path)))
    second.wait(10)
    assert second.run.path != first.run.path


def test_live_run_is_not_resumed_twice(tmp_path, monkeypatch):
    fake_spawn(monkeypatch, "import time; time.sleep(30)")
    req = TuneRequest(file=str(FIX / "matmul64.py"), store_root=str(tmp_path))
    job = start_tune(req)
    meta = job.run.load()
    meta.state, meta.pid = "running", job.pid
    job.run.save(meta)
    monkeypatch.setattr(jobs, "pid_alive", lambda pid: pid == job.pid)
    try:
        with pytest.raises(AsightError, match="already tuning this function"):
            start_tune(req)
    finally:
        jobs.kill_group(job.pid)
        job.wait(10)


def make_run(tmp_path, state="running", pid=999_999_999, records: list[str] | None = None) -> Run:
    run = RunStore(tmp_path).create(RunMeta(id="r1", file="f.py", function="f", state=state, pid=pid,
                                            sessions=[{"started": 0}]))
    if records is not None:
        run.records_path.write_text("".join(records))
        shutil.copy(FIX / "runs" / "mbr128" / "database_workload.json", run.path)   # the workload they name
    return run


RECORD = json.dumps([0, [[[], []], [2.5e-05], {"kind": "llvm"}, []]]) + "\n"
FAILED = json.dumps([0, [[[], []], [1e10], {"kind": "llvm"}, []]]) + "\n"


def test_dead_running_job_is_marked_failed_and_torn_line_tolerated(tmp_path):
    run = make_run(tmp_path, records=[RECORD, FAILED, RECORD[:40]])
    meta = refresh_run(run)
    assert meta.state == "failed" and "ended without finishing" in meta.error
    assert meta.trials_done == 2 and meta.best_us == pytest.approx(25.0)
    assert run.events()[-1]["type"] == "finished" and run.events()[-1]["state"] == "failed"
    assert meta.sessions[-1]["state"] == "failed"
    assert refresh_run(run).finished == meta.finished      # idempotent
    assert run.repair_db() == 1                            # the torn line goes, the rest stays
    assert run.records_path.read_text() == RECORD + FAILED


def test_finished_and_fresh_runs_are_left_alone(tmp_path):
    done = make_run(tmp_path, state="done")
    assert refresh_run(done).state == "done"
    queued = RunStore(tmp_path).create(RunMeta(id="q", file="f.py", function="f", state="queued",
                                               sessions=[{"started": time.time()}]))
    assert refresh_run(queued).state == "queued"         # spawned a moment ago, pid not written yet


def test_pid_alive_only_for_tune_jobs():
    assert not jobs.pid_alive(None)
    assert not jobs.pid_alive(999_999_999)
    import os
    assert not jobs.pid_alive(os.getpid())                # alive, but not a tune_job process


def test_poll_events_returns_complete_lines_only(tmp_path):
    run = make_run(tmp_path, state="done")
    job = TuneJob.attach(run)
    assert job.poll_events() == []
    with run.events_path.open("a") as out:
        out.write(json.dumps({"type": "started"}) + "\n" + '{"type": "prog')
    assert job.poll_events() == [{"type": "started"}]
    with run.events_path.open("a") as out:
        out.write('ress", "trials_done": 8}\n')
    assert job.poll_events() == [{"type": "progress", "trials_done": 8}]
    assert job.poll_events() == []
    assert job.wait(5).state == "done" and job.done


def test_cancel_escalates_to_sigkill(tmp_path, monkeypatch):
    # a job that ignores SIGTERM: cancel must still end it (SIGKILL after the grace period)
    fake_spawn(monkeypatch, "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)")
    job = start_tune(TuneRequest(file=str(FIX / "matmul64.py"), store_root=str(tmp_path)))
    time.sleep(0.5)
    started = time.monotonic()
    job.cancel()
    assert time.monotonic() - started < jobs.CANCEL_GRACE_S + 1.0
    meta = job.wait(5)
    assert job.done and meta.state == "cancelled" and meta.error is None


def test_attach_and_cancel_a_queued_run_without_pid(tmp_path):
    run = RunStore(tmp_path).create(RunMeta(id="q", file="f.py", function="f", state="queued",
                                            sessions=[{"started": time.time()}]))
    job = TuneJob.attach(run)
    assert not job.done
    job.cancel()
    meta = job.wait(5)
    assert job.done and meta.state == "cancelled"


def test_attach_follows_a_live_job_until_it_ends(tmp_path, monkeypatch):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"], start_new_session=True)
    run = RunStore(tmp_path).create(RunMeta(id="r", file="f.py", function="f", state="running", pid=proc.pid,
                                            sessions=[{"started": time.time()}]))
    monkeypatch.setattr(jobs, "pid_alive", lambda pid: pid == proc.pid and proc.poll() is None)
    job = TuneJob.attach(run)
    time.sleep(0.3)
    assert not job.done
    meta = job.wait(10)
    assert job.done and meta.state == "failed" and "ended without finishing" in meta.error


# --------------------------------------------------------------------------- guided runs and GPU targets


def _gpu_base(tmp_path) -> str:
    """The mbr128 run as if it had been tuned for an H100 (its records then seed a guided run)."""
    import shutil
    shutil.copytree(FIX / "runs" / "mbr128", tmp_path / "runs" / "mbr128")
    meta = json.loads((tmp_path / "runs" / "mbr128" / "run.json").read_text())
    meta.update(target={"kind": "cuda", "arch": "sm_90a"}, target_label="cuda sm_90a")
    meta["extra"]["target_spec"] = "nvidia/nvidia-h100"
    (tmp_path / "runs" / "mbr128" / "run.json").write_text(json.dumps(meta))
    records = tmp_path / "runs" / "mbr128" / "database_tuning_record.json"
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    for row in rows:                     # its records' target too: a run's target is its records'
        row[1][2] = meta["target"]
    records.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return "mbr128"


def test_a_guided_run_tunes_on_its_base_runs_target_and_a_gpu_target_needs_a_gpu_here(tmp_path, monkeypatch):
    """Outside probe F8/F13: the Re-tune lens on a GPU run tuned this CPU, seeded with the GPU's records,
    and headlined the GPU's 0.13 ms; a GPU tune without a GPU left a failed run behind."""
    from asight_lsp.engine.targets import TargetError

    def no_gpu(run=None):
        raise TargetError("--target gpu: no NVIDIA GPU on this machine (nvidia-smi not found); name a target")
    monkeypatch.setattr(tuning, "local_gpus", no_gpu)
    base = _gpu_base(tmp_path)
    request = dict(file=str(FIX / "matmul_bias_relu.py"), function="MatmulBiasRelu.main", guided_by=base,
                   store_root=str(tmp_path), trials=8)
    with pytest.raises(AsightError, match=r"^no NVIDIA GPU on this machine \(nvidia-smi not found\): a cuda target "
                                          r"is tuned on its GPU; tune where it is, or measure on one with --rpc"):
        start_tune(TuneRequest(**request))
    with pytest.raises(AsightError, match=r"^run mbr128 was tuned for cuda sm_90a: a guided run tunes on the same "
                                          r"target, its records seed it \(got --target llvm; leave it out\)"):
        start_tune(TuneRequest(**request, target="llvm"))
    with pytest.raises(AsightError, match="^no NVIDIA GPU on this machine"):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), target='{"kind": "cuda"}', store_root=str(tmp_path)))
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["mbr128"]     # nothing was created
    spawned = fake_spawn(monkeypatch)
    monkeypatch.setattr(tuning, "local_gpus", lambda run=None: [{"name": "NVIDIA H100", "compute_cap": "9.0"}])
    monkeypatch.setattr(tuning, "device_missing", lambda kind: None)   # and its device files
    job = start_tune(TuneRequest(**request))
    assert spawned and job.run.load().extra["target_spec"] == "nvidia/nvidia-h100"
    job.wait(10)


def test_a_one_function_units_name_is_that_functions_name_too():
    """A run tuned without --func is named by its unit; the Re-tune lens names the function."""
    one = outline_of((FIX / "matmul_bias_relu.py").read_text())
    assert tuning.selection_names(one, select(one, "MatmulBiasRelu.main")) == ("MatmulBiasRelu.main", "MatmulBiasRelu")
    two = outline_of(TWO_UNITS)
    fn = next(f for f in two.functions if f.unit == "Mod")
    names = tuning.selection_names(two, select(two, fn.id))
    assert ("Mod" in names) == (len([f for f in two.functions if f.unit == "Mod"]) == 1)


def test_a_rocm_target_without_an_amd_gpu_is_refused_before_a_run_is_made(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning.os.path, "exists", lambda path: False if path == "/dev/kfd" else True)
    with pytest.raises(AsightError, match=r"^no AMD GPU on this machine \(/dev/kfd is missing\)"):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), target="rocm", store_root=str(tmp_path)))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("target, message", [
    ("metal", r"^no Metal device on this machine \(Metal is macOS's\): a metal target is tuned on its device; tune "
              r"where it is, or measure on one with --rpc HOST:PORT:KEY$"),
    ("webgpu", r"^no WebGPU device on this machine"),
    ("cuda", r"^no NVIDIA GPU visible to CUDA here \(CUDA_VISIBLE_DEVICES=''\): a cuda target is tuned on its GPU"),
    ('{"kind": "cuda", "arch": "sm_90"}', r"^no NVIDIA GPU visible to CUDA here"),
    ("gpu", r"^no NVIDIA GPU visible to CUDA here"),
])
def test_a_device_this_machine_lacks_is_refused_before_a_run_is_made(target, message, tmp_path, monkeypatch):
    """Probe 4, F6: vulkan/opencl/metal tunes, and cuda where nvidia-smi answers but CUDA sees no device,
    failed in the job and left a failed run (which the code view then showed instead of an adopted run)."""
    if target == "metal" and sys.platform == "darwin":
        pytest.skip("Metal is this machine's")
    monkeypatch.setattr(tuning, "local_gpus", lambda run=None: [{"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0"}])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(AsightError, match=message):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), target=target, store_root=str(tmp_path)))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("target, message", [
    ("nvptx", r"^nvptx is TVM's LLVM back end for NVIDIA GPUs; ASight tunes an NVIDIA GPU with --target cuda"),
    ('{"kind": "nvptx", "mcpu": "sm_90"}', r"^nvptx is TVM's LLVM back end"),
    ("hexagon", r"^ASight does not tune hexagon targets \(it tunes llvm CPUs and cuda, rocm"),
])
def test_a_kind_tvm_knows_and_no_tuning_job_measures_is_refused_before_a_run_is_made(target, message, tmp_path):
    """Probe 5, N4: `tune --target nvptx` failed in the job ("tune on nvptx64 hardware", a CPU's words)
    and left a failed run; the editor answered "started"."""
    with pytest.raises(AsightError, match=message):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), target=target, store_root=str(tmp_path)))
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_rpc_tracker_is_refused_before_a_run_is_made(tmp_path):
    import socket
    with socket.socket() as sock:       # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for rpc, message in [(f"127.0.0.1:{port}:h100", f"^cannot reach the RPC tracker at 127.0.0.1:{port}: Connection refused$"),
                         ("127.0.0.1:99999:h100", r"^--rpc expects HOST:PORT:KEY of a TVM RPC tracker \(got '127.0.0.1:99999:h100'\)$")]:
        with pytest.raises(AsightError, match=message):
            start_tune(TuneRequest(file=str(FIX / "matmul64.py"), target="nvidia/nvidia-h100", rpc=rpc,
                                   store_root=str(tmp_path)))
    assert not (tmp_path / "runs").exists()


def test_latest_passes_over_a_run_that_failed_before_measuring_anything(tmp_path):
    import shutil
    shutil.copytree(FIX / "runs" / "mbr128", tmp_path / "runs" / "mbr128")
    store = RunStore(str(tmp_path))
    refused = store.create(RunMeta(id="zz-refused", file="x.py", function="f", state="failed", created=time.time()))
    assert store.get("latest").id == "mbr128"
    (refused.path / "database_tuning_record.json").write_text("[0, [[[], []], [1e-05], null, []]]\n")
    assert store.get("latest").id == "zz-refused"           # it has a record: it is the latest run
