"""``asight adopt`` on the recorded H100 run (fixtures/gpu): the views work on a CUDA run without a GPU
and without re-tuning (feature extraction and trace replay on CPU-side IR only)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.runs import RunStore

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "fixtures" / "gpu"


def asight(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def code_view(store, run, level: str, *more: str) -> dict:
    """``asight code --json`` of the recorded matmul at ``level`` (it must succeed)."""
    proc = asight("code", str(GPU / "matmul1024.py"), "--run", run.id, "--work-dir", str(store), "--level", level,
                  "--json", *more)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def adopted(tmp_path_factory):
    store = tmp_path_factory.mktemp("adopt") / ".asight"
    proc = asight("adopt", str(GPU), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    return store, RunStore(str(store)).get("latest"), proc.stdout


def test_adopt_matches_the_workload_and_takes_the_target_from_the_records(adopted):
    store, run, out = adopted
    meta = run.load()
    assert meta.state == "done" and meta.kind == "tir"
    assert meta.target["kind"] == "cuda" and meta.target["arch"] == "sm_90a" and meta.target_label == "cuda sm_90a"
    info = meta.extra["adopted"]
    assert (info["records"], info["measured"], info["how"]) == (128, 66, "structural hash")
    assert abs(meta.best_us - 134.58) < 0.01
    assert (run.path / "counters.jsonl").read_bytes() == (GPU / "counters.jsonl").read_bytes()
    assert (run.path / "database_tuning_record.json").read_bytes() == (GPU / "database_tuning_record.json").read_bytes()
    assert "matched by structural hash" in out and "target   cuda sm_90a" in out
    assert "note     the headline (tuned against DLight's default schedule" in out     # probe 12, F6
    assert "counters lack" not in out      # the recorded file has every metric the views use


def test_space_loops_principles_and_report_work_on_the_cuda_run(adopted, tmp_path):
    store, run, _ = adopted
    proc = asight("space", "--run", run.id, "--work-dir", str(store), "--json")
    assert proc.returncode == 0, proc.stderr
    space = json.loads(proc.stdout)
    assert space["status"] == "ok" and space["run"]["measured"] == 66
    assert space["best"]["trial"] == 76 and abs(space["best"]["latency_us"] - 134.58) < 0.01
    contour = space["contour"]       # the recorded Nsight Compute counters, not the model
    assert contour["origin"]["origin"] == "measured" and contour["origin"]["label"] == "measured (Nsight Compute)"
    assert (contour["origin"]["profiled"], contour["origin"]["candidates"]) == (41, 66)
    assert [c["id"] for c in contour["categories"]] == ["dram", "sm", "gpu"]
    assert contour["agreement"]["verdict"] == "agrees" and contour["agreement"]["per_category"]["dram"]["rho"] > 0.98
    assert contour["lines"] and contour["draw"] == "full"
    assert contour["legend"][0].startswith("The measured (Nsight Compute) counters agree with the latencies")
    winners = {c.get("winner") for c in space["cells"] if c.get("z") is not None}
    assert winners <= {"dram", "sm", "gpu"} and winners
    loops = asight("loops", "--run", run.id, "--work-dir", str(store))
    assert loops.returncode == 0, loops.stderr
    assert "threadIdx.x" in loops.stdout and "blockIdx.x" in loops.stdout
    assert "GPU (best, trial 76):" in loops.stdout and "thread_bound 30%" in loops.stdout
    assert "  threads: blockIdx.x 256 × threadIdx.x 64 · vthread 8 (256 blocks of 64 threads)" in loops.stdout
    assert "  latency-bound: 6 % of warp slots busy, 128 registers a thread" in loops.stdout
    # no CPU parallel rows on a GPU stage (outside probe 2, F5): its threads are bound, not parallel loops
    assert "  parallel:" not in loops.stdout and "parallel 0%" not in loops.stdout
    assert "  vectorize:" not in loops.stdout and "vectorized 0%" not in loops.stdout   # float4 fills sit in A_shared
    assert "cache-read A" in " ".join(str(c.get("tags")) for c in space["categories"])
    assert {c.get("strategy") for c in space["cells"]} <= {"threads+vector+unroll", "threads+unroll", "threads+vector",
                                                           "threads"}
    principles = asight("principles", "--run", run.id, "--work-dir", str(store))
    assert principles.returncode == 0 and "in block C" in principles.stdout
    assert "--target '{\"arch\":\"sm_90a\"" in principles.stdout    # a re-tune goes to the records' GPU target
    out = tmp_path / "report.html"
    report = asight("report", str(GPU / "matmul1024.py"), "--run", run.id, "--work-dir", str(store), "-o", str(out))
    assert report.returncode == 0, report.stderr
    html = out.read_text()
    assert "target cuda sm_90a" in html and "GPU — best candidate (trial 76)" in html
    assert "measured (Nsight Compute)" in html
    assert "builders loading the cores" not in html and "machine that tuned" in html
    # the legend as the panel and the PNG say it: its agreement with latency, the group that goes against
    # speed (outside probe 12, F4: only in the page's embedded JSON)
    section = html.split('<section id="search-space">', 1)[1].split("</section>", 1)[0]
    assert "<li>The measured (Nsight Compute) counters agree with the latencies: Spearman ρ = +0.89" in section
    assert "<li>⚠ GPU goes against speed (ρ = -0.80)" in section
    assert "with cuBLAS/cuDNN through PyTorch as a third line) is measured on the GPU by `asight tune` there" in html


def test_adopt_refuses_a_function_the_database_does_not_hold(tmp_path):
    store = tmp_path / ".asight"
    proc = asight("adopt", str(GPU), "--file", str(ROOT / "fixtures" / "matmul64.py"), "--work-dir", str(store))
    assert proc.returncode == 2
    assert "is not in" in proc.stderr and "no workload of the 1 in the database" in proc.stderr
    assert not RunStore(str(store)).all()


def test_without_counters_the_contour_is_the_model_and_says_so(tmp_path):
    folder = tmp_path / "tuned"
    folder.mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (folder / name).write_bytes((GPU / name).read_bytes())
    store = tmp_path / ".asight"
    assert asight("adopt", str(folder), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store)).returncode == 0
    proc = asight("space", "--run", "latest", "--work-dir", str(store), "--json")
    contour = json.loads(proc.stdout)["contour"]
    assert contour["origin"] == {"origin": "model", "label": "model (MetaSchedule features)",
                                 "why": "the run has no counters.jsonl"}
    assert all(c["source"].startswith("model:") for c in contour["categories"])
    # a GPU run's model reads the features as a GPU has them: no CPU cores or SIMD words (outside probe F11)
    sources = " ".join(c["source"] for c in contour["categories"])
    assert "cores" not in sources and "threads launched per store (blockIdx × threadIdx extents)" in sources


def test_code_view_shows_the_cuda_source_linked_to_the_tir_lines_without_a_gpu(adopted):
    store, run, _ = adopted
    view = code_view(store, run, "cuda", "--task", "main")   # the TIR run's one task, as space and loops take it
    assert view["language"] == "cuda" and view["candidate"]["trial"] == 76
    lines = view["text"].splitlines()
    assert any("__global__" in line for line in lines)
    by_source = {}
    for link in view["links"]:
        by_source.setdefault(link["sourceLine"] + 1, []).append(lines[link["line"]].strip())
    source = (GPU / "matmul1024.py").read_text().splitlines()
    init = next(i for i, t in enumerate(source, 1) if "T.float32(0)" in t)
    update = next(i for i, t in enumerate(source, 1) if "A[vi, vk] * B[vk, vj]" in t)
    assert by_source[init] and all(t.startswith("C_local_ptr[") and "0x0p+0f" in t for t in by_source[init])
    assert by_source[update] and all("A_shared_ptr[" in t and "B_shared_ptr[" in t for t in by_source[update])
    cpu = asight("code", str(ROOT / "fixtures" / "matmul64.py"), "--level", "cuda", "--work-dir", str(store))
    assert cpu.returncode != 0 and "the cuda level shows the kernels of a run tuned for CUDA; this function has " \
        "no run" in cpu.stderr


def test_counters_without_a_gpu_say_why_and_keep_the_adopted_ones(adopted):
    store, run, _ = adopted
    before = (run.path / "counters.jsonl").read_bytes()
    proc = asight("counters", "--run", run.id, "--work-dir", str(store))
    assert proc.returncode == 2
    assert "not collected: no CUDA device on this machine" in proc.stderr
    assert (run.path / "counters.jsonl").read_bytes() == before


NO_NVCC_PATH = "/usr/bin:/bin"    # no nvcc there; cuda-bindings (NVRTC) is not installed in this venv


def test_ptx_without_a_cuda_compiler_says_why_in_one_line(adopted):
    import importlib.util
    if importlib.util.find_spec("cuda") is not None:
        pytest.skip("cuda-bindings (NVRTC) is installed here: PTX has a compiler")
    store, run, _ = adopted
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "code", str(GPU / "matmul1024.py"), "--run", run.id,
                           "--work-dir", str(store), "--level", "ptx"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PATH": NO_NVCC_PATH})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("asight: error: PTX needs a CUDA compiler: nvcc is not on PATH and NVRTC (the "
                                   "cuda-bindings package) is not installed; the cuda level shows the kernels' source")


def test_ptx_with_nvcc_is_linked_through_the_cuda_lines_to_the_tir(adopted):
    import shutil
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: PTX is not offered (the test above checks the reason)")
    store, run, _ = adopted
    view = code_view(store, run, "ptx")
    assert view["language"] == "ptx" and view["candidate"]["trial"] == 76
    lines = view["text"].splitlines()
    assert any(line.startswith(".target sm_90a") for line in lines) and any(".entry main_kernel" in l for l in lines)
    source = (GPU / "matmul1024.py").read_text().splitlines()
    update = next(i for i, t in enumerate(source) if "A[vi, vk] * B[vk, vj]" in t)
    fma = [link for link in view["links"] if lines[link["line"]].strip().startswith("fma.rn")]
    assert fma and all(link["sourceLine"] == update for link in fma), "every FMA comes from the update line"
    assert len(view["links"]) > 100


def test_lowered_tir_of_a_cuda_run_is_built_here_and_the_cpu_levels_say_where_its_kernels_are(adopted):
    store, run, _ = adopted
    view = code_view(store, run, "lowered")
    assert 'T.launch_thread("threadIdx.x", 64)' in view["text"] and "A_shared = T.alloc_shared" in view["text"]
    source = (GPU / "matmul1024.py").read_text().splitlines()
    update = next(i for i, t in enumerate(source) if "A[vi, vk] * B[vk, vj]" in t)
    assert any(link["sourceLine"] == update for link in view["links"])
    for level in ("llvm", "asm"):
        proc = asight("code", str(GPU / "matmul1024.py"), "--run", run.id, "--work-dir", str(store), "--level", level)
        assert proc.returncode == 2 and proc.stderr.strip() == (
            f"asight: error: the {level} level shows a CPU build; this run's target is cuda: its kernels are at "
            "--level cuda or ptx (lowered TIR at --level lowered)")


def test_profile_and_hotspots_of_a_cuda_run_say_why_and_where_its_measured_facts_are(adopted):
    store, run, _ = adopted
    for command in ("profile", "hotspots"):
        proc = asight(command, str(GPU / "matmul1024.py"), "--run", run.id, "--work-dir", str(store))
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.strip() == (
            f"asight: error: run {run.id} is a cuda run: profile and hotspots time programs on this machine's CPU, "
            "not on a GPU; its measured time is the tuning's (134.6 µs on the machine that tuned it), its counters "
            "are in `asight space` and `asight loops`, its kernel at `asight code --level cuda`")


def _copy_of_the_run(folder: Path, edit) -> Path:
    folder.mkdir()
    (folder / "database_workload.json").write_bytes((GPU / "database_workload.json").read_bytes())
    lines = (GPU / "database_tuning_record.json").read_text().splitlines(keepends=True)
    (folder / "database_tuning_record.json").write_text("".join(edit(lines)))
    return folder


def _impossible_decision(lines: list[str], index: int) -> list[str]:
    record = json.loads(lines[index])
    decision = next(d for d in record[1][0][1] if not isinstance(d[1], list))   # a SampleCategorical's index
    decision[1] = 99
    return lines[:index] + [json.dumps(record) + "\n"] + lines[index + 1:]


def test_a_record_tvm_cannot_replay_is_refused_at_adopt_with_its_line_and_a_torn_last_line_is_said(tmp_path):
    """Outside probe F4: one impossible decision made TVM refuse the whole database in every view."""
    bad = _copy_of_the_run(tmp_path / "bad", lambda lines: _impossible_decision(lines, 66))
    store = tmp_path / ".asight"
    proc = asight("adopt", str(bad), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 2 and not store.exists()
    assert proc.stderr.startswith(f"asight: error: {bad / 'database_tuning_record.json'} line 67: the record's "
                                  "trace does not replay on its workload (")
    assert "decision is: 99" in proc.stderr and "nothing was adopted" in proc.stderr
    torn = _copy_of_the_run(tmp_path / "torn", lambda lines: lines[:-1] + [lines[-1][: len(lines[-1]) // 2]])
    proc = asight("adopt", str(torn), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    assert "adopted  127 records" in proc.stdout
    assert ("note     1 torn line of database_tuning_record.json (a write cut short) set aside in "
            "database_tuning_record.json.unreadable; the 127 readable records are kept") in proc.stdout
    first = RunStore(str(store)).get("latest").id
    again = asight("adopt", str(torn), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert again.returncode == 0 and (f"note     {first} was adopted from this folder before (same records file "
                                      "size): this is a second run of it") in again.stdout


def test_counters_of_a_failed_build_are_noted_at_adopt_and_leave_the_measured_contour_as_it_was(adopted, tmp_path):
    store, run, _ = adopted
    records = [json.loads(line) for line in (GPU / "database_tuning_record.json").read_text().splitlines()]
    failed = next(i for i, r in enumerate(records) if min(r[1][1]) >= 1e9)
    lines = (GPU / "counters.jsonl").read_text().splitlines()
    extra = {**json.loads(lines[1]), "candidate": failed}
    folder = _copy_of_the_run(tmp_path / "f", lambda rows: rows)
    (folder / "counters.jsonl").write_text("\n".join(lines + [json.dumps(extra)]) + "\n")
    other = tmp_path / ".asight"
    proc = asight("adopt", str(folder), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(other))
    assert proc.returncode == 0, proc.stderr
    assert (f"note     counters of candidate {failed} (line {len(lines) + 1}) not used: no measured latency there "
            "(a failed build or run)") in proc.stdout

    def contour(where, run_id):
        out = asight("space", "--run", run_id, "--work-dir", str(where), "--json")
        assert out.returncode == 0, out.stderr
        c = json.loads(out.stdout)["contour"]
        return c["levels"], len(c["lines"]), c["agreement"]["message"]

    assert contour(other, "latest") == contour(store, run.id)


def test_the_code_of_a_candidate_that_failed_where_it_was_tuned_says_so(adopted):
    """Outside probe F14: trial 0 (a build timeout on the H100 box) read like any candidate."""
    store, run, _ = adopted
    records = [json.loads(line) for line in (GPU / "database_tuning_record.json").read_text().splitlines()]
    failed = next(i for i, r in enumerate(records) if min(r[1][1]) >= 1e9)
    view = code_view(store, run, "cuda", "--candidate", str(failed))
    assert view["note"] == (f"trial {failed} has no measured latency: it failed where it was tuned (its build or run "
                            "failed or timed out); this is the code it would have run")
    best = code_view(store, run, "cuda")
    assert best["note"] == ("no per-line latency shares: they come from a profile on this machine's CPU, and this "
                            "is a GPU run")


def _edited_record(lines: list[str], index: int, **change) -> list[str]:
    record = json.loads(lines[index])
    if "secs" in change:
        record[1][1] = change["secs"]
    if "target" in change:
        record[1][2] = change["target"]
    return lines[:index] + [json.dumps(record) + "\n"] + lines[index + 1:]


def test_records_of_another_target_or_faster_than_any_h100_are_refused_at_adopt(tmp_path):
    """Outside probe 4, F1/F2: a CPU record became the H100 run's best; run_secs 2e-6 (1,074 TFLOP/s) was
    shown as "best 2.0 µs" in every view.  The worker's FLOP count and buffer types judge the latency."""
    store = tmp_path / ".asight"
    cpu = _copy_of_the_run(tmp_path / "cpu", lambda lines: _edited_record(
        lines, 19, secs=[9e-5], target={"kind": "llvm", "mcpu": "znver4", "keys": ["cpu"]}))
    proc = asight("adopt", str(cpu), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 2 and not store.exists()
    assert "were tuned for 2 targets (cuda sm_90a: 127; llvm znver4: 1; line 20 is llvm znver4)" in proc.stderr
    fast = _copy_of_the_run(tmp_path / "fast", lambda lines: _edited_record(lines, 5, secs=[2e-6]))
    proc = asight("adopt", str(fast), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 2 and not store.exists()
    assert proc.stderr.strip().endswith("database_tuning_record.json line 6: 2 µs for 2,147,483,648 FLOP is 1,074 "
                                        "TFLOP/s, above the 67 TFLOP/s fp32 peak of the fastest H100 SXM / H200 "
                                        "(×1.25 for clocks): not a measurement; nothing was adopted")


def test_counters_with_some_of_the_metrics_are_noted_at_adopt_and_the_loop_view_says_what_is_not_measured(tmp_path):
    """An ncu run with fewer --metrics (outside probe 4, F7): adopt names the metrics the views use that
    the file lacks, and the loop view says the limiting factor is not measured and why."""
    keep = ("launch__registers_per_thread", "launch__shared_mem_per_block_static",
            "sm__warps_active.avg.pct_of_peak_sustained_active", "gpu__time_duration.sum")
    folder = _copy_of_the_run(tmp_path / "f", lambda rows: rows)
    lines = []
    for line in (GPU / "counters.jsonl").read_text().splitlines():
        entry = json.loads(line)
        entry["metrics"] = {k: v for k, v in entry["metrics"].items() if k in keep}
        lines.append(json.dumps(entry))
    (folder / "counters.jsonl").write_text("\n".join(lines) + "\n")
    store = tmp_path / ".asight"
    proc = asight("adopt", str(folder), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    assert ("note     the counters lack 2 of the 5 metrics the GPU views use: sm__throughput.avg.pct_of_peak_sustained_"
            "elapsed, dram__throughput.avg.pct_of_peak_sustained_elapsed (the views say those figures are not "
            "measured)\n") in proc.stdout
    loops = asight("loops", "--run", "latest", "--work-dir", str(store))
    assert loops.returncode == 0, loops.stderr
    assert ("  launch (measured): 128 registers a thread, 13,056 B shared memory a block, achieved occupancy 6 %\n"
            "  limiting factor: not measured (the counters lack sm__throughput.avg.pct_of_peak_sustained_elapsed, "
            "dram__throughput.avg.pct_of_peak_sustained_elapsed)\n") in loops.stdout
    assert "blockIdx.x 256 · vthread 8 · threadIdx.x 64" in loops.stdout      # the best schedule's line, with extents


def test_a_folder_listing_the_function_twice_is_refused(tmp_path):
    """Outside probe 6, N2: a second workload line (the same module under another hash string) with its own
    records: adopt checked one copy and the code view showed the other copy's unchecked 2 µs record."""
    folder = _copy_of_the_run(tmp_path / "dup", lambda lines: lines)
    first = json.loads((folder / "database_workload.json").read_text().splitlines()[0])
    with (folder / "database_workload.json").open("a") as out:
        out.write(json.dumps(["1" + str(first[0])[1:], first[1]]) + "\n")
    store = tmp_path / ".asight"
    proc = asight("adopt", str(folder), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 2 and not store.exists()
    assert "database_workload.json lists Matmul1024 2 times (lines 1, 2: the same function under other hash " \
           "strings" in proc.stderr


def test_a_blank_line_is_refused_at_adopt_and_a_workload_copied_in_after_adopt_is_shown_by_no_view(tmp_path):
    """Outside probe 7, F3: a blank records line was adopted and TVM's loader then crashed the worker in
    every code view (exit -11); F2: the function's workload copied into the run after adopt, its records
    at 2 µs, was the code view's best."""
    blank = _copy_of_the_run(tmp_path / "blank", lambda lines: lines + ["\n"])
    store = tmp_path / ".asight"
    proc = asight("adopt", str(blank), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 2 and not store.exists()
    assert "database_tuning_record.json line 129 is blank: TVM's loader crashes on a blank line" in proc.stderr
    proc = asight("adopt", str(GPU), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    run = RunStore(str(store)).get("latest")
    workloads = (run.path / "database_workload.json").read_text()
    row = json.loads(workloads)
    (run.path / "database_workload.json").write_text(workloads + json.dumps(["1" + row[0], row[1]]) + "\n")
    fast = []
    for line in (run.path / "database_tuning_record.json").read_text().splitlines():
        record = json.loads(line)
        record[0], record[1][1] = 1, [2e-6] if min(record[1][1]) < 1 else record[1][1]
        fast.append(json.dumps(record) + "\n")
    with (run.path / "database_tuning_record.json").open("a") as out:
        out.writelines(fast)
    for view in (["code", str(GPU / "matmul1024.py"), "--level", "cuda"], ["space"], ["loops"]):
        proc = asight(*view, "--run", run.id, "--work-dir", str(store))
        assert proc.returncode == 2 and "2.0 µs" not in proc.stdout, (view, proc.stdout)
        assert "changed after adopt" in proc.stderr and "adopt the work folder again" in proc.stderr, (view, proc.stderr)


def test_a_source_with_a_byte_that_is_not_utf8_is_adopted_as_other_commands_read_it(tmp_path):
    """Outside probe 12, F5: a Latin-1 "é" in a comment passed `check` and `code`, and adopt answered
    "internal error: UnicodeDecodeError"; a binary file gets check's sentence."""
    source = tmp_path / "latin1.py"
    source.write_bytes((GPU / "matmul1024.py").read_bytes() + "# café\n".encode("latin-1"))
    proc = asight("adopt", str(GPU), "--file", str(source), "--work-dir", str(tmp_path / ".asight"))
    assert proc.returncode == 0 and "matched by structural hash" in proc.stdout, proc.stderr
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\xd0")
    proc = asight("adopt", str(GPU), "--file", str(binary), "--work-dir", str(tmp_path / ".asight"))
    assert proc.returncode == 2 and "the file contains NUL bytes" in proc.stderr and "internal" not in proc.stderr


def test_a_block_named_otherwise_before_adopt_is_said_at_adopt_and_in_the_loop_view(tmp_path):
    """Outside probe 12, F3: the H100 matmul with its block "C" named "S" was adopted without a word
    (structural matching ignores names), and the loop view lost its best-schedule line silently."""
    source = tmp_path / "matmul_s.py"
    source.write_text((GPU / "matmul1024.py").read_text().replace('T.sblock("C")', 'T.sblock("S")'))
    store = tmp_path / ".asight"
    proc = asight("adopt", str(GPU), "--file", str(source), "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    said = "get block C, which this function does not have (the same computation with its blocks named otherwise"
    assert any(line.startswith("note     the records of run") and said in line for line in proc.stdout.splitlines())
    run = RunStore(str(store)).get("latest")
    loops = asight("loops", "--run", run.id, "--work-dir", str(store), "--json")
    assert loops.returncode == 0, loops.stderr
    assert any(said in note for note in json.loads(loops.stdout)["loopView"]["notes"])
    assert f"asight: note: the records of run {run.id} {said}" in loops.stderr


def test_a_baseline_line_with_fewer_metrics_keeps_every_group_measured_and_says_its_reference(tmp_path):
    """Outside probe 12, F1: a baseline line with only a kernel time made the contour the model ("none of
    the metrics is one the contour uses"); with DRAM alone, SM and GPU vanished without a word."""
    counters = tmp_path / "c.jsonl"
    baseline = {"candidate": "baseline", "tool": "ncu (Nsight Compute 2025.3)",
                "metrics": {"gpu__time_duration.sum": 250_000.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 5.0}}
    counters.write_text((GPU / "counters.jsonl").read_text() + json.dumps(baseline) + "\n")
    store = tmp_path / ".asight"
    proc = asight("adopt", str(GPU), "--file", str(GPU / "matmul1024.py"), "--counters", str(counters),
                  "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    space = asight("space", "--work-dir", str(store), "--json")
    assert space.returncode == 0, space.stderr
    contour = json.loads(space.stdout)["contour"]
    assert contour["origin"]["origin"] == "measured" and [c["id"] for c in contour["categories"]] == ["dram", "sm", "gpu"]
    assert contour["origin"]["against"] == ("the baseline's counters (the median profiled candidate for the metrics "
                                            "its line lacks)")
    [dram] = [c for c in contour["categories"] if c["id"] == "dram"]
    assert dram["source"].endswith("mean log2 gain of dram__throughput.avg.pct_of_peak_sustained_elapsed against the "
                                   "baseline's counters")
    assert "the max over DRAM / SM / GPU" in contour["metric"]
