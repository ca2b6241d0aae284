"""What adopt refuses in records and counters made elsewhere (outside probe 4, F1, F2, F5, F8), and the
GPU peak a claimed latency is checked against (analysis/gpu_peak.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from asight_lsp.analysis.gpu_peak import impossible_rate, input_kind
from asight_lsp.errors import AsightError
from asight_lsp.services.adopt_checks import counter_candidates, require_adoptable

H100 = {"kind": "cuda", "arch": "sm_90a"}
FLOPS = 2 * 1024 ** 3                  # the recorded 1024³ fp32 matmul
REPLY = {"workload": 0, "flops": FLOPS, "dtypes": ["float32"]}


def record(trial: int, latency_us: float | None, target=None, workload: int = 0) -> dict:
    return {"trial": trial, "workload": workload, "latency_us": latency_us, "target": target or H100}


def test_a_latency_no_gpu_of_the_architecture_reaches_is_no_measurement():
    assert impossible_rate(FLOPS, 134.6, "sm_90a", ["float32"]) is None            # 16 TFLOP/s
    why = impossible_rate(FLOPS, 2.0, "sm_90a", ["float32"])                        # 1,074 TFLOP/s
    assert why == ("2 µs for 2,147,483,648 FLOP is 1,074 TFLOP/s, above the 67 TFLOP/s fp32 peak of the fastest "
                   "H100 SXM / H200 (×1.25 for clocks): not a measurement")
    for us, arch in ((5.0, "sm_90a"), (10.0, "sm_90a"), (20.0, "sm_80"), (200.0, "sm_53")):   # probe 5, N1
        assert impossible_rate(FLOPS, us, arch, ["float32"]) is not None, (us, arch)
    assert impossible_rate(FLOPS, 30.0, "sm_90a", ["float32"]) is None                # 72 TFLOP/s: within 1.25x
    assert impossible_rate(FLOPS, 2.0, "sm_90a", ["float16"]) is None               # fp16 tensor cores: 990
    assert "A100" in impossible_rate(FLOPS, 8.0, "sm_80", ["float32"])
    assert "peak of the fastest NVIDIA GPU of any architecture" in impossible_rate(FLOPS, 1e-6, "sm_999", ["float32"])
    assert impossible_rate(None, 1e-6, "sm_90a", ["float32"]) is None                # FLOPs unknown: not judged
    assert [input_kind(d) for d in (["float32"], ["float16", "float32"], ["bfloat16"], ["int8", "int32"],
                                    ["int32"])] == ["fp32", "fp16", "fp16", "int8", "fp32"]


@pytest.mark.parametrize("records, message", [
    ([], r"w/database_tuning_record.json holds no record of M.main \(0 records in all\): nothing was tuned there"),
    ([record(0, None), record(1, None)], r"none of the 2 records of M.main has a latency: every build or run failed"),
    ([record(0, 130.0), record(1, 90.0, {"kind": "llvm", "mcpu": "znver4"}), record(2, 140.0)],
     r"the records of M.main were tuned for 2 targets \(cuda sm_90a: 2; llvm znver4: 1; line 2 is llvm znver4\)"),
    ([record(0, 130.0), record(1, 130.0, {"kind": "cuda", "arch": "sm_80"})], r"2 targets \(cuda sm_90a: 1; cuda sm_80"),
    ([record(0, 130.0), record(5, 2.0)], r"database_tuning_record.json line 6: 2 µs for 2,147,483,648 FLOP"),
    ([record(0, 130.0, {"kind": "cuda", "arch": "sm_9x"})], r"the records' target arch 'sm_9x' is no NVIDIA "),
])
def test_records_that_cannot_make_a_run_are_refused_before_anything_is_written(records, message):
    with pytest.raises(AsightError, match=message + ".*nothing was adopted$"):
        require_adoptable(records, REPLY, Path("w"), "M.main")


def test_another_workloads_records_and_a_cpu_run_are_not_judged_by_a_gpu_peak():
    require_adoptable([record(0, 134.6), record(1, 1e-3, {"kind": "llvm"}, workload=1)], REPLY, Path("w"), "M.main")
    require_adoptable([record(0, 134.6, {"kind": "llvm", "mcpu": "znver4", "num-cores": 64})], REPLY, Path("w"), "M.main")


def test_a_cpu_record_faster_than_its_cores_compute_or_below_a_nanosecond_is_no_measurement():
    """Outside probe 8, F3: 1 ps on an adopted CPU record became "best 0.0 µs" in every view."""
    cpu = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}
    with pytest.raises(AsightError, match=r"^w/database_tuning_record.json line 1: 30 µs for 2,147,483,648 FLOP is "
                                          r"71.6 TFLOP/s, above what 2 CPU cores compute at fp32 \(1.04 TFLOP/s: "):
        require_adoptable([record(0, 30.0, cpu)], REPLY, Path("w"), "M.main")
    require_adoptable([record(0, 30_000.0, cpu)], REPLY, Path("w"), "M.main")          # 72 GFLOP/s: plausible
    with pytest.raises(AsightError, match=r"line 1: a latency of 0.001 ns is below a nanosecond"):
        require_adoptable([record(0, 1e-6, cpu)], {**REPLY, "flops": None}, Path("w"), "M.main")


def test_a_cpu_call_under_a_microsecond_is_bounded_by_a_few_cores_whatever_num_cores_says():
    """Outside probe 9, F3: a plain ``llvm`` target (no ``num-cores``) was bounded by 1,024 cores, so 5 ns
    for a 524,288-FLOP matmul (105 TFLOP/s) was adopted as "best 0.0 µs"."""
    matmul64 = {**REPLY, "flops": 2 * 64 ** 3}
    plain = {"keys": ["cpu"], "kind": "llvm", "tag": ""}
    for target in (plain, {**plain, "num-cores": 64}):
        with pytest.raises(AsightError, match=r"^w/database_tuning_record.json line 2: 0.005 µs for 524,288 FLOP is "
                                              r"105 TFLOP/s, above what 4 CPU cores \(a call under 1 µs is a few "
                                              r"cores' work: .*nothing was adopted$"):
            require_adoptable([record(0, 20.0, target), record(1, 0.005, target)], matmul64, Path("w"), "M.main")
    for us, target in ((20.0, {**plain, "num-cores": 2}), (1.0, plain), (0.5, plain), (20.0, plain)):
        require_adoptable([record(0, us, target)], matmul64, Path("w"), "M.main")


def test_counters_whose_kernel_time_is_far_from_the_record_are_another_programs():
    records = [record(0, 134.6), record(1, 16495.6)]
    ok = [{"candidate": 0, "line": 1, "metrics": {"gpu__time_duration.sum": 216_768.0}}]      # 1.6x: ncu's usual
    assert counter_candidates(ok, records, 0, "c.jsonl") is None
    swapped = [{"candidate": 0, "line": 3, "metrics": {"gpu__time_duration.sum": 16_495_552.0}}]
    with pytest.raises(AsightError, match=r"^c.jsonl:3: candidate 0's counters time its kernel at 16,495.6 µs, its "
                                          r"record at 134.6 µs \(123× apart"):
        counter_candidates(swapped, records, 0, "c.jsonl")
    in_us = [{"candidate": 0, "line": 2, "metrics": {"gpu__time_duration.sum": 216.8}}]      # probe 6, N8
    with pytest.raises(AsightError, match=r"621× apart; gpu__time_duration.sum is in nanoseconds, and this one "
                                          r"reads like microseconds; "):
        counter_candidates(in_us, records, 0, "c.jsonl")
    with pytest.raises(AsightError, match=r"16,495.6 µs, its record at 134.6 µs \(123× apart; Nsight"):
        counter_candidates(swapped, records, 0, "c.jsonl")      # no unit hint where it does not fit


def test_a_counters_file_that_starts_with_a_byte_order_mark_is_read(tmp_path):
    """Probe 6, N8: a counters.jsonl saved with a UTF-8 BOM was "not JSON (Unexpected UTF-8 BOM (decode
    using utf-8-sig))", Python's advice to a programmer; the mark is no line's."""
    from asight_lsp.store.counters import counters_text
    line = '{"candidate": 0, "tool": "ncu", "metrics": {"gpu__time_duration.sum": 216768.0}}\n'
    (tmp_path / "c.jsonl").write_bytes(b"\xef\xbb\xbf" + line.encode())
    assert counters_text(tmp_path / "c.jsonl") == line


def test_occupancy_above_what_the_records_gpu_holds_for_those_registers_is_refused():
    """Probe 6, N3: 45 % with 128 registers a thread passed on an H100 (64 warp slots: at most 25 %)."""
    from asight_lsp.analysis.gpu_peak import warp_slots
    assert [warp_slots(a) for a in ("sm_90a", "sm_75", "sm_86", "sm_120", "sm_999")] == [64, 32, 48, 48, None]
    entry = lambda occ: [{"candidate": 0, "line": 2, "metrics": {"launch__registers_per_thread": 128,  # noqa: E731
                                                                 "sm__warps_active.avg.pct_of_peak_sustained_active": occ}}]
    assert counter_candidates(entry(24.9), [record(0, 134.6)], 0, "c.jsonl") is None
    with pytest.raises(AsightError, match=r"^c.jsonl:2: achieved occupancy 45 % with 128 registers a thread: on "
                                          r"sm_90a \(64 warp slots an SM\) .* fill at most 25 %"):
        counter_candidates(entry(45), [record(0, 134.6)], 0, "c.jsonl")
    other = {"kind": "cuda", "arch": "sm_75"}                      # Turing: 32 slots, so 45 % can be
    assert counter_candidates(entry(45), [record(0, 134.6, other)], 0, "c.jsonl") is None


def test_an_adopted_runs_records_and_best_are_checked_again_where_the_views_read_them(tmp_path):
    """Outside probe 6, N1: a trial of the run folder's records edited to 2 µs after adopt, or run.json's
    best_us, were shown as "best 2.0 µs"; the views now meet adopt's checks first (services/lookup,
    services/run_data)."""
    import json
    import shutil
    from asight_lsp.services.lookup import prepare_run
    from asight_lsp.store.runs import DB_RECORDS, Run, read_records
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "mbr128", tmp_path / "r")
    run = Run(tmp_path / "r")
    meta = run.load()
    best = min(r["latency_us"] for r in read_records(run.path) if r["latency_us"] is not None)
    meta.extra["adopted"] = {"workload": 0, "flops": None, "dtypes": ["float32"]}
    meta.best_us, meta.measurement = best, None
    run.save(meta)
    assert prepare_run(run).best_us == best
    meta.best_us = 2.0
    run.save(meta)
    with pytest.raises(AsightError, match=r"^run r: run.json's best \(2.0 µs\) is not its records' \("):
        prepare_run(run)
    meta.best_us = best
    run.save(meta)
    lines = (run.path / DB_RECORDS).read_text().splitlines()
    row = json.loads(lines[3])
    row[1][2] = {"kind": "cuda", "arch": "sm_90a"}
    (run.path / DB_RECORDS).write_text("\n".join(lines[:3] + [json.dumps(row)] + lines[4:]) + "\n")
    with pytest.raises(AsightError, match=r"tuned for 2 targets .*; run r's records changed after adopt: adopt "
                                          r"the work folder again$"):
        prepare_run(run)
    lines[3] = json.dumps(json.loads(lines[3]))       # the record as it was; a re-measured best is the record's
    (run.path / DB_RECORDS).write_text("\n".join(lines) + "\n")
    from tests.conftest import measured
    meta.best_us, meta.measurement = 2.0, measured(2438.0, 2.0)
    run.save(meta)
    assert prepare_run(run).best_us == 2.0


def test_asight_model_on_a_tir_gpu_run_says_what_the_model_view_is_not_what_profile_is():
    """Probe 6, N8: `asight model` on the adopted TIR cuda run answered with profile's sentence."""
    from asight_lsp.services.profiling import device_run_refusal
    from asight_lsp.store.runs import RunMeta
    meta = RunMeta(id="R", file="m.py", function="Matmul1024.main", target={"kind": "cuda", "arch": "sm_90a"},
                   best_us=134.6)
    said = device_run_refusal(meta, "asight model")
    assert said.startswith("run R is a cuda run: asight model shows a tuned Relax model's tasks, and this run tuned "
                           "the TIR function Matmul1024.main; ") and "profile and hotspots" not in said
    assert device_run_refusal(meta).startswith("run R is a cuda run: profile and hotspots time programs on this "
                                               "machine's CPU, not on a GPU")


def test_counters_timing_the_kernel_far_faster_than_its_record_are_said_at_adopt():
    """Probe 5, N2: ncu 4.5x faster than the runner was adopted without a word (ncu locks the clocks and
    reads 1.14-1.83x slower on the recorded H100 run: none of its 41 lines is said)."""
    from asight_lsp.services.adopt_checks import faster_counters
    records = [record(0, 134.6), record(1, 140.0), record(2, None)]
    line = lambda cand, ns: {"candidate": cand, "line": 1, "metrics": {"gpu__time_duration.sum": ns}}  # noqa: E731
    assert faster_counters([line(0, 216_768.0), line(1, 72_000.0), line(2, 1.0), line("baseline", 5.0)], records) is None
    assert faster_counters([line(0, 29_900.0), line(1, 30_000.0)], records) == (
        "2 counters lines time the kernel more than 2× faster than the record (candidate 0: 29.9 µs against 134.6 µs), "
        "where Nsight Compute, which locks the clocks, reads 1.1-1.6× slower than the runner: check that they are "
        "this run's counters")


def _adopted_copy(tmp_path):
    """fixtures/runs/mbr128 as adopt leaves a run: its records' best, the workload, the files' digests."""
    import shutil
    from asight_lsp.store.owner import mark_own
    from asight_lsp.store.runs import Run, read_records
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "mbr128", tmp_path / "r")
    run = Run(tmp_path / "r")
    meta = run.load()
    meta.best_us = min(r["latency_us"] for r in read_records(run.path) if r["latency_us"] is not None)
    meta.measurement = None
    meta.extra["adopted"] = {"workload": 0, "flops": None, "dtypes": ["float32"], "digest": run.database_digest(),
                             "set_aside": 0}
    run.save(meta)
    mark_own(run.path)             # adopt makes the user's own run
    return run


def _edit_records(run, edit) -> None:
    import json
    from asight_lsp.store.runs import DB_RECORDS
    rows = [json.loads(line) for line in (run.path / DB_RECORDS).read_text().splitlines()]
    edit(rows)
    (run.path / DB_RECORDS).write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.mark.parametrize("edit, message", [
    # every record's CPU changed (probe 7, F5: sm_80 over the sm_90a run): one target, a plausible time
    (lambda rows: [row[1][2].update(mcpu="skylake") for row in rows],
     r"^run r: database_tuning_record.json changed after adopt checked it: the views show only what adopt "
     r"checked; adopt the work folder again$"),
    # a bad latency names its line, not run.json (probe 7, F4)
    (lambda rows: rows[3][1].__setitem__(1, [-1.0]),
     r"^run r: database_tuning_record.json line 4: run_secs must be positive seconds, not -1.0: its records "
     r"changed after adopt; adopt the work folder again$"),
])
def test_an_adopted_runs_database_changed_since_adopt_is_not_shown(tmp_path, edit, message):
    from asight_lsp.services.lookup import prepare_run
    run = _adopted_copy(tmp_path)
    assert prepare_run(run).extra["adopted"]["digest"] == run.database_digest()
    _edit_records(run, edit)
    with pytest.raises(AsightError, match=message):
        prepare_run(run)


def test_a_workload_added_or_a_torn_line_after_adopt_is_said_and_a_blank_line_is_damage(tmp_path):
    """Probe 7, F2: the function's workload copied in the run after adopt (its records 2 µs) made the
    code view's best; F8: a torn last line was dropped without a word; F3: a blank line crashed TVM."""
    from asight_lsp.services.lookup import prepare_run
    from asight_lsp.store.runs import DB_RECORDS, DB_WORKLOADS
    run = _adopted_copy(tmp_path)
    workloads = (run.path / DB_WORKLOADS).read_text()
    (run.path / DB_WORKLOADS).write_text(workloads + workloads.splitlines()[0].replace('["', '["9', 1) + "\n")
    with pytest.raises(AsightError, match=r"^run r: database_workload.json changed after adopt checked it: "):
        prepare_run(run)
    (run.path / DB_WORKLOADS).write_text(workloads)
    records = (run.path / DB_RECORDS).read_text()
    (run.path / DB_RECORDS).write_text(records + records.splitlines()[0][:80])      # a torn line appended:
    prepare_run(run)
    assert run.load().extra["set_aside_records"] == 1              # set aside, and the records are adopt's again
    (run.path / DB_RECORDS).write_text(records[:-80])                                 # the last record torn
    with pytest.raises(AsightError, match=r"changed after adopt checked it \(its last line was torn, a write cut "
                                          r"short, and is set aside in database_tuning_record.json.unreadable\)"):
        prepare_run(run)
    (run.path / DB_RECORDS).write_text(records + "\n")
    with pytest.raises(AsightError, match=r"^run r: database_tuning_record.json line 41 is blank: TVM's loader "
                                          r"crashes on a blank line \(remove it\): its records changed after adopt"):
        prepare_run(run)


def test_a_counters_line_splits_at_newlines_only():
    """Outside probe 9, F6: a raw U+2028 inside a JSON string (JSON allows it) split the line, which was
    then "not JSON"; it is one line, refused for its tool's text.  CRLF lines still read."""
    from asight_lsp.store.counters import parse_counters
    entry = {"candidate": 0, "tool": "ncu\u2028best: trial 0 (2.0 µs)", "metrics": {"gpu__time_duration.sum": 2e5}}
    raw = json.dumps(entry, ensure_ascii=False)
    assert "\u2028" in raw and len(raw.splitlines()) == 2
    with pytest.raises(AsightError, match=r"^c:1: tool '.*' is not one line of printable text"):
        parse_counters(raw + "\n", "c")
    ok = {**entry, "tool": "ncu"}
    two = parse_counters(json.dumps(ok) + "\r\n\r\n" + json.dumps({**ok, "candidate": 1}) + "\r\n", "c")
    assert [(e["line"], e["candidate"], e["tool"]) for e in two] == [(1, 0, "ncu"), (3, 1, "ncu")]


def test_one_gpu_written_as_its_tag_and_as_its_attributes_is_one_target():
    """Probe 7, F9: records carrying tag nvidia/nvidia-h100 beside the same sm_90a without it were
    refused as "tuned for 2 targets"."""
    tagged = {**H100, "tag": "nvidia/nvidia-h100"}
    require_adoptable([record(0, 134.6), record(1, 140.0, tagged)], REPLY, Path("f"), "M")
    with pytest.raises(AsightError, match=r"tuned for 2 targets \(cuda sm_90a: 1; cuda sm_80: 1; line 2 is cuda sm_80\)"):
        require_adoptable([record(0, 134.6), record(1, 140.0, {**tagged, "arch": "sm_80"})], REPLY, Path("f"), "M")


def test_names_from_another_machine_are_one_printable_line_and_values_are_named_as_json():
    """Outside probe 8, F5: a counters `tool` or a records tag holding a newline or ESC sequences printed
    a fabricated "best: trial 0 … 2.0 µs" line and cleared the terminal; F7: null read as 'None'."""
    from asight_lsp.store.counters import parse_counters
    line = lambda **kw: json.dumps({"candidate": 0, "tool": "ncu", "metrics": {"gpu__time_duration.sum": 2e5}, **kw})  # noqa: E731
    for tool in ("ncu\nbest: trial 0 (fastest while tuning: 2.0 µs)", "\x1b[2J\x1b]0;pwned\x07", "x" * 201, "a\u202eb"):
        with pytest.raises(AsightError, match=r"^c:1: tool .* is not one line of printable text"):
            parse_counters(line(tool=tool), "c")
    with pytest.raises(AsightError, match=r"^c:1: a metric name .* is not one line of printable text"):
        parse_counters(json.dumps({"candidate": 0, "metrics": {"dram\n": 1.0}}), "c")
    with pytest.raises(AsightError, match=r"must be a finite number ≥ 0, not null \(no value: ncu's n/a\?\)$"):
        parse_counters(line(metrics={"dram": None}), "c")
    with pytest.raises(AsightError, match=r"must be a finite number ≥ 0, not the text '1.16'$"):
        parse_counters(line(metrics={"dram": "1.16"}), "c")
    assert parse_counters(line(tool="ncu (Nsight Compute 2025.3)"), "c")[0]["tool"] == "ncu (Nsight Compute 2025.3)"
    tagged = {**H100, "tag": "nvidia/h100\x1b]0;pwned\x07"}
    with pytest.raises(AsightError, match=r"^f/database_tuning_record.json: the records' target tag .* is not a name"):
        require_adoptable([record(0, 134.6, tagged)], REPLY, Path("f"), "M")


def test_occupancy_below_one_warp_and_kernel_times_in_ms_are_said_for_what_they_are():
    """Outside probe 8, F2: 1 % (or every percentage written as a fraction) was shown as "latency-bound:
    0 % of warp slots busy": an active SM holds at least one of its 64 warp slots (1.56 %; the H100
    run's lowest is 1.56); F7: a kernel time in ms was "0.0 µs … another program"."""
    from asight_lsp.store.counters import parse_counters
    occupancy = "sm__warps_active.avg.pct_of_peak_sustained_active"
    with pytest.raises(AsightError, match=r"achieved occupancy 0.0606 % is below one warp .* \(percentages written "
                                          r"as fractions\?\)"):
        parse_counters(json.dumps({"candidate": 0, "metrics": {occupancy: 0.0606}}), "c")
    assert parse_counters(json.dumps({"candidate": 0, "metrics": {occupancy: 1.56}}), "c")
    turing = {"kind": "cuda", "arch": "sm_75"}                              # 32 slots: one warp is 3.1 %
    entry = {"candidate": 0, "line": 4, "metrics": {occupancy: 2.0}}
    with pytest.raises(AsightError, match=r"^c:4: achieved occupancy 2 % is below one warp of the 32 warp slots of an "
                                          r"sm_75 SM \(3.12 %\)"):
        counter_candidates([entry], [record(0, 134.6, turing)], 0, "c")
    in_ms = [{"candidate": 0, "line": 1, "metrics": {"gpu__time_duration.sum": 0.2168}}]
    with pytest.raises(AsightError, match=r"time its kernel at 0.000217 µs, .* reads like milliseconds; .*: these "
                                          r"counters are in another unit$"):
        counter_candidates(in_ms, [record(0, 134.6)], 0, "c")


@pytest.mark.parametrize("workload, message", [
    (1, r"^run r: run.json was edited after adopt: its extra.adopted \(workload 1\) does not fit the database files "
        r"adopt checked, which are unchanged \(database_tuning_record.json holds no record of MatmulBiasRelu.main"),
    (True, r"^run r: run.json is unreadable \(its extra.adopted.workload is true, not what `asight adopt` writes"),
])
def test_an_edited_extra_adopted_is_blamed_on_run_json_not_on_the_records(tmp_path, workload, message):
    """Outside probe 11, F3: "workload": 1 edited into run.json was "the records changed after adopt"
    and "nothing was tuned there yet"; "workload": true was quoted cut off before the bad field."""
    import json
    from asight_lsp.services.lookup import prepare_run
    run = _adopted_copy(tmp_path)
    data = json.loads(run.meta_path.read_text())
    data["extra"]["adopted"]["workload"] = workload
    run.meta_path.write_text(json.dumps(data))
    with pytest.raises(AsightError, match=message):
        prepare_run(run)


def test_the_baseline_line_is_judged_as_a_candidates_where_it_can_be():
    """The baseline's counters were never checked: every contour is a gain over them, and a baseline of
    1 ns or an occupancy no H100 reaches would have been drawn as measured."""
    def baseline(ns, occupancy=6.0):
        return [{"candidate": "baseline", "line": 1, "metrics": {
            "gpu__time_duration.sum": ns, "launch__registers_per_thread": 128,
            "sm__warps_active.avg.pct_of_peak_sustained_active": occupancy}}]
    records = [record(0, 134.6)]
    assert counter_candidates(baseline(250_000.0), records, 0, "c.jsonl", work=REPLY) is None   # 250 µs
    with pytest.raises(AsightError, match=r"^c.jsonl:1: the baseline's counters time its kernel at 2 µs: 2 µs for "
                                          r"2,147,483,648 FLOP is 1,074 TFLOP/s, above the 67 TFLOP/s fp32 peak"):
        counter_candidates(baseline(2_000.0), records, 0, "c.jsonl", work=REPLY)
    with pytest.raises(AsightError, match=r"^c.jsonl:1: the baseline's counters time its kernel at 0 µs: no kernel"):
        counter_candidates(baseline(0.0), records, 0, "c.jsonl")
    with pytest.raises(AsightError, match=r"^c.jsonl:1: achieved occupancy 45 % with 128 registers a thread"):
        counter_candidates(baseline(250_000.0, 45.0), records, 0, "c.jsonl")
    assert counter_candidates(baseline(2_000.0), records, 0, "c.jsonl") is None    # no FLOPs known: no bound


def test_nsight_compute_counters_on_a_cpu_runs_records_are_refused():
    """Outside probe 12, F2: an llvm run adopted with ncu lines showed a "measured (Nsight Compute)" contour."""
    line = [{"candidate": 0, "line": 1, "metrics": {"gpu__time_duration.sum": 134_600.0}}]
    cpu = [record(0, 134.6, {"kind": "llvm", "mcpu": "znver4"})]
    with pytest.raises(AsightError, match=r"^c.jsonl: counters are Nsight Compute's, measured on a CUDA GPU; these "
                                          r"records are for llvm znver4: they cannot be its programs' counters"):
        counter_candidates(line, cpu, 0, "c.jsonl")
    perf = [{"candidate": 0, "line": 1, "tool": "perf 6.8", "metrics": {"cycles": 1e6, "cache-misses": 10.0}}]
    with pytest.raises(AsightError, match=r"^c.jsonl: holds no Nsight Compute metric \(tool perf 6.8\): the measured "
                                          r"contour reads Nsight Compute counters of a CUDA run, and these records are "
                                          r"for llvm znver4"):       # not "Nsight Compute's" (outside probe 13, F3)
        counter_candidates(perf, cpu, 0, "c.jsonl")
    assert counter_candidates([], cpu, 0, "c.jsonl") is None
    assert counter_candidates(line, [record(0, 134.6)], 0, "c.jsonl") is None
