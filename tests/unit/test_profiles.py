"""The TVM-free side of profiling: source mapping, attribution, derived figures, cache, CLI output."""
from __future__ import annotations

import math
import shutil

import pytest

from asight_lsp.services import profiling as profiles
from asight_lsp.analysis import attribution, block_origin, measurement, memory_model
from asight_lsp.analysis import peak as peak_rules
from asight_lsp.store import caches
from asight_lsp.services import lookup
from asight_lsp import errors as errors_mod
from asight_lsp.commands import profile as profile_cmd
from asight_lsp.tvmscript.selection import select
from asight_lsp.store.runs import RunMeta, RunStore
from asight_lsp.tvmscript.outline import build_outline

from tests.conftest import FIXTURES, fixture_text

MBR = "matmul_bias_relu.py"


def _mbr():
    outline = build_outline(fixture_text(MBR), str(FIXTURES / MBR))
    fn = outline.function("MatmulBiasRelu.main")
    return outline, fn, {b.name: b for b in fn.blocks}


def _slog(x: float) -> float:
    return math.copysign(math.log2(abs(x) + 1), x)


# --------------------------------------------------------------------------- block matching


def test_transformed_blocks_map_back_by_span_then_name():
    _, fn, blocks = _mbr()
    lines = {name: b.range["start"]["line"] + 1 for name, b in blocks.items()}  # 1-based like TVM spans
    # decompose_reduction keeps the update store's span; the init has its own store span
    assert block_origin.match_block("matmul_update", [lines["matmul"] + 4], None, fn.blocks)[0].name == "matmul"
    # a cache-write block has no span: the name prefix decides
    blk, evidence = block_origin.match_block("matmul_global", [], None, fn.blocks)
    assert (blk.name, evidence) == ("matmul", "name prefix")
    # a span wins over a misleading name
    blk, evidence = block_origin.match_block("relu", [lines["bias_add"] + 2], None, fn.blocks)
    assert (blk.name, evidence) == ("bias_add", "store span")
    assert block_origin.match_block("bias_add", [], None, fn.blocks)[1] == "name"
    assert block_origin.match_block("T_transpose", [], None, fn.blocks) == (None, "unmatched")


def test_longest_prefix_wins():
    outline = build_outline('''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("C"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
    for i in range(4):
        with T.sblock("C_pack"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
''')
    blk, _ = block_origin.match_block("C_pack_global", [], None, outline.functions[0].blocks)
    assert blk.name == "C_pack"


# --------------------------------------------------------------------------- stages and attribution


def _stage(index, us, *names_and_lines):
    return {"index": index, "us": us, "p25_us": us, "p75_us": us, "loop_kinds": ["serial"],
            "blocks": [{"name": n, "realize_lines": None, "store_lines": s} for n, s in names_and_lines]}


def test_stages_tie_to_source_blocks_and_sum():
    _, fn, blocks = _mbr()
    mm = blocks["matmul"].range["start"]["line"] + 1
    data = {"stages": [_stage(0, 90.0, ("matmul_init", [mm + 3]), ("matmul_update", [mm + 4])),
                       _stage(1, 6.0, ("bias_add", [])), _stage(2, 4.0, ("relu", []))],
            "sum_us": 100.0, "whole_us": 105.0, "ratio": 100 / 105, "calls": 50, "source": "rdtsc"}
    mapped = attribution.map_stages(data, fn.blocks)
    assert [s["source_blocks"] for s in mapped["stages"]] == [
        ["MatmulBiasRelu.main/matmul"], ["MatmulBiasRelu.main/bias_add"], ["MatmulBiasRelu.main/relu"]]
    assert mapped["stages"][0]["lines"] == [blocks["matmul"].range["start"]["line"],
                                            blocks["matmul"].range["end"]["line"]]
    assert mapped["outside_us"] == pytest.approx(5.0)
    per_block = attribution.attribute_blocks(mapped["stages"], fn.blocks)
    assert [b["us"] for b in per_block] == [90.0, 6.0, 4.0]
    assert sum(b["share"] for b in per_block) == pytest.approx(1.0)
    assert all(b["attribution"] == "stage" for b in per_block)


def test_fused_stage_is_split_by_flops_and_inlined_block_points_to_consumer():
    _, fn, blocks = _mbr()
    # matmul with relu fused into its nest (reverse_compute_at); bias_add inlined into relu
    data = {"stages": [_stage(0, 100.0, ("matmul_update", []), ("relu", []))], "sum_us": 100.0, "whole_us": 100.0}
    mapped = attribution.map_stages(data, fn.blocks)
    per_block = {b["name"]: b for b in attribution.attribute_blocks(mapped["stages"], fn.blocks)}
    mm_flops, relu_flops = blocks["matmul"].flops, blocks["relu"].flops
    assert per_block["matmul"]["us"] == pytest.approx(100.0 * mm_flops / (mm_flops + relu_flops))
    assert "split by FLOPs" in per_block["relu"]["attribution"]
    assert per_block["bias_add"]["us"] == 0.0
    assert per_block["bias_add"]["inlined_into"] == "MatmulBiasRelu.main/relu"
    assert per_block["bias_add"]["attribution"] == "inlined into relu"


# --------------------------------------------------------------------------- figures


AVX2 = ["sse2", "avx", "avx2", "fma"]
AVX512 = AVX2 + ["avx512f", "avx512bw", "avx512vl"]


def test_peak_formula_and_measured_reference():
    host = {"threads": 2, "tsc_hz": 2.5e9, "cpu": "znver3", "flags": AVX2,
            "sgemm": {"gflops": 170.0, "source": "numpy sgemm"}}
    peak = peak_rules.peak_figures(host)
    assert peak["formula"]["gflops"] == pytest.approx(32 * 2.5 * 2)
    assert "znver3" in peak["formula"]["source"] and "2 x 256-bit FMA" in peak["formula"]["source"]
    assert peak["gflops"] == 170.0 and peak["source"] == "numpy sgemm"    # the larger one is used
    slow = peak_rules.peak_figures({**host, "cpu": "skylake-avx512", "flags": AVX512,
                                    "sgemm": {"gflops": 20.0, "source": "numpy sgemm"}})
    assert slow["gflops"] == pytest.approx(64 * 2.5 * 2) and slow["source"].startswith("formula")
    assert peak_rules.peak_figures({"threads": 1})["gflops"] is None


def test_peak_rule_follows_the_microarchitecture_not_only_the_flags():
    """AVX-512 is 64 FLOP/cycle only with two 512-bit FMA pipes: Zen 4 runs it as two 256-bit halves."""
    rule = peak_rules.flops_per_cycle
    assert rule("znver4", set(AVX512))[0] == 32          # AVX-512 flags, double-pumped
    assert rule("znver5", set(AVX512))[0] == 64
    assert rule("sapphirerapids", set(AVX512))[0] == 64
    assert rule("icelake-client", set(AVX512))[0] == 32  # one 512-bit FMA port on client cores
    assert rule("znver3", set(AVX2))[0] == 32 and rule("haswell", set(AVX2))[0] == 32
    assert rule("znver1", set(AVX2))[0] == 16
    # an unknown CPU name: the flags, counting AVX-512 conservatively as one 512-bit pipe
    assert rule("mystery", set(AVX512)) == (32, peak_rules.FLAG_FALLBACK[0][2])
    assert rule(None, set(AVX2))[0] == 32 and rule(None, {"sse2"})[0] == 8 and rule(None, set()) is None
    for cpu, flags in (("znver3", AVX2), ("znver4", AVX512), ("skylake-avx512", AVX512)):
        host = {"threads": 2, "tsc_hz": 3e9, "cpu": cpu, "flags": flags}
        assert peak_rules.peak_figures(host)["gflops"] == pytest.approx(rule(cpu, set(flags))[0] * 3 * 2)


def test_memory_figures_decode_feature_rows():
    _, fn, _ = _mbr()
    row = [0.0] * 164
    row[1], row[2] = _slog(1000), _slog(1000)            # float add/sub, mul
    group2 = 57
    for b, (access, nbytes, unique) in enumerate([(0, 8000, 400), (2, 4000, 400)]):
        base = group2 + 18 * b
        row[base + access] = 1.0
        row[base + 3], row[base + 4] = _slog(nbytes), _slog(unique)
        row[base + 7] = 1.0                              # reuse type: loop
        row[base + 12] = _slog(20)                       # reuse count
    memory = memory_model.memory_figures({"rows": [row], "stores": ["matmul_update"], "source": "PerStoreFeature"},
                                     fn.blocks)
    entry = memory["rows"][0]
    assert entry["source"] == "MatmulBiasRelu.main/matmul"
    assert entry["bytes"] == pytest.approx(12000) and entry["unique_bytes"] == pytest.approx(800)
    assert entry["reuse"] == pytest.approx(15) and entry["flops"] == pytest.approx(2000)
    assert [b["access"] for b in entry["buffers"]] == ["read", "readwrite"]
    assert entry["buffers"][0]["reuse"] == "loop" and entry["buffers"][0]["reuse_count"] == pytest.approx(20)


def test_cachegrind_lines_sum_per_block():
    _, fn, blocks = _mbr()
    mm_line = blocks["matmul"].range["end"]["line"] + 1
    relu_line = blocks["relu"].range["end"]["line"] + 1
    data = {"lines": [{"line": mm_line, "Ir": 10, "D1mr": 5}, {"line": mm_line - 1, "Ir": 1, "D1mr": 1},
                      {"line": relu_line, "Ir": 3, "D1mr": 0}, {"line": 0, "Ir": 7, "D1mr": 2}],
            "source": "cachegrind"}
    out = memory_model.cachegrind_by_block(data, fn.blocks)
    by = {b["name"]: b for b in out["blocks"]}
    assert by["matmul"]["D1mr"] == 6 and by["matmul"]["Ir"] == 11 and by["relu"]["Ir"] == 3
    assert out["lines"][-1]["block"] is None


# --------------------------------------------------------------------------- whole profiles


def _check(ok=True):
    return {"ok": ok, "rtol": 1e-3, "atol": 1e-4, "atol_scaled_by": "max", "source": "numpy.isclose",
            "buffers": [{"name": "D", "ok": ok, "mismatched": 0 if ok else 7, "elements": 16384,
                         "max_abs_err": 0.0 if ok else 3.5}]}


def _headline(base_us=2000.0, tuned_us=100.0, rounds=9, check_ok=True, busy=False, labels=("main",)):
    """What the worker's harness returns: per-round per-call means of every program, and the load."""
    wobble = [1.0 + 0.01 * ((r * 7) % 5 - 2) for r in range(rounds)]
    samples = {}
    for name in labels:
        samples[f"untuned {name}"] = [base_us / len(labels) * w for w in wobble]
        if tuned_us is not None:
            samples[f"tuned {name}"] = [tuned_us / len(labels) * w for w in reversed(wobble)]
    raw = {"samples_us": samples, "calls_per_repeat": {k: 2 for k in samples}, "rounds": rounds, "seconds": 1.0,
           "threads": 2, "method": "interleaved rounds",
           "load": {"other_cores": 0.9 if busy else 0.0, "steal": 0.0, "loadavg": [0.1, 0.1]}}
    return {"raw": raw, "untuned": [f"untuned {n}" for n in labels],
            "tuned": [f"tuned {n}" for n in labels] if tuned_us is not None else [],
            "check": _check(check_ok) if tuned_us is not None else None}


def _raw_tir(check_ok=True, tuned_us=100.0, busy=False):
    stages = {"stages": [_stage(0, 2000.0, ("matmul", [20, 21])), _stage(1, 2.0, ("bias_add", [26])),
                         _stage(2, 3.0, ("relu", [30]))], "sum_us": 2005.0, "whole_us": 2010.0, "ratio": 0.997}
    return {"kind": "tir", "target": "llvm -mcpu=znver3", "options": {}, "seconds": 1.0,
            "host": {"threads": 2, "tsc_hz": 2.4e9, "cpu": "znver3", "flags": ["avx2", "fma"],
                     "sgemm": {"gflops": 160.0, "source": "numpy"}},
            "kernels": [{"name": "main", "flops": 4227072.0, "best": {"latency_us": 110.0, "match": "structural"},
                         "notes": [], "stages": {"baseline": stages}, "features": {}}],
            "headline": _headline(tuned_us=tuned_us, check_ok=check_ok, busy=busy)}


def _record(raw):
    head = raw["headline"]
    return measurement.comparison_record(head["raw"], head["untuned"], head["tuned"], "test", "function", 0.0,
                                         {"check": head["check"]})


def test_finish_profile_reads_every_latency_from_the_record():
    outline, fn, _ = _mbr()
    raw = _raw_tir()
    record = _record(raw)
    profile = attribution.finish_profile(raw, outline, select(outline, None), None, record)
    kernel = profile["kernels"][0]
    assert kernel["function"] == "MatmulBiasRelu.main" and kernel["range"] == fn.range
    assert kernel["flops"]["source"] == attribution.SOURCE_MAP_FLOPS
    assert kernel["flops"]["value"] == sum(b.flops for b in fn.blocks if b.name != "root")
    assert kernel["baseline"] is record["untuned"] and kernel["tuned"] is record["tuned"]
    assert kernel["speedup"] == pytest.approx(20.0, rel=0.02)
    assert kernel["gflops"]["tuned"] == pytest.approx(kernel["flops"]["value"] / record["tuned"]["median_us"] / 1e3)
    assert kernel["peak_fraction"]["tuned"] == pytest.approx(kernel["gflops"]["tuned"] / 160.0)
    blocks = kernel["blocks"]["baseline"]
    assert blocks[0]["id"] == "MatmulBiasRelu.main/matmul"
    # block latencies are shares of the headline: they add up to it, the instrumented time is kept apart
    assert sum(b["us"] for b in blocks) == pytest.approx(record["untuned"]["median_us"])
    assert blocks[0]["stage_us"] == pytest.approx(2000.0)
    summary = profile["summary"]
    assert summary["speedup"] == record["speedup"]["estimate"] and summary["ci"] == record["speedup"]["ci"]
    assert summary["verdict"] == "faster" and summary["check_ok"] is True and summary["busy"] is False
    assert profile["peak"]["source"] == "numpy" and profile["measurement"] is record


def test_relax_tasks_tie_to_bindings():
    text = fixture_text("relax_cnn.py")
    outline = build_outline(text)
    fn = outline.function("Net.main")
    line = {b.name: b.range["start"]["line"] for b in fn.bindings}
    raw = {"name": "main", "flops": 1e6, "flops_source": "x", "task_records": {}, "notes": [],
           "tasks": {"tuned": {"sum_us": 100.0, "tasks": [
               {"task": "fused_conv2d_relu", "call": 0, "vars": ["c1", "r1"], "us": 40.0, "flops": 4e5},
               {"task": "fused_conv2d_add_relu", "call": 0, "vars": ["c2", "s", "r2"], "us": 55.0, "flops": 5e5},
               {"task": "mean", "call": 0, "vars": ["p"], "us": 5.0, "flops": None}]}}}
    head = _headline(3000.0, 100.0, labels=("",))
    record = measurement.comparison_record(head["raw"], head["untuned"], head["tuned"], "test", "program", 0.0)
    out = attribution.finish_relax(raw, fn, record)
    tasks = out["tasks"]["tuned"]["tasks"]
    assert tasks[0]["bindings"] == ["Net.main/c1", "Net.main/r1"]
    assert tasks[0]["lines"] == [line["c1"], line["r1"]]
    assert tasks[1]["share"] == pytest.approx(0.55)
    assert tasks[0]["gflops"] == pytest.approx(4e5 / 40e-6 / 1e9)
    by = {b["name"]: b for b in out["bindings"]["tuned"]}
    assert by["s"]["us"] == 55.0 and by["s"]["fused_with"] == ["c2", "r2"]
    assert by["d"]["tasks"] == []
    assert out["speedup"] == pytest.approx(30.0, rel=0.02) and out["baseline"] is record["untuned"]


# --------------------------------------------------------------------------- orchestration and cache


class FakeWorker:
    """Stands in for WorkerClient: answers ``profile`` with canned raw data and counts calls."""

    def __init__(self, raw):
        self.raw, self.calls = raw, []

    def request(self, method, params=None, timeout=None, on_event=None):
        if method == "check":
            return {"problems": self.problems, "units": {u["name"]: {"ok": True} for u in params["units"]}}
        self.calls.append((method, params))
        return self.raw

    problems: list = []


@pytest.fixture()
def store(tmp_path):
    src = tmp_path / MBR
    shutil.copy(FIXTURES / MBR, src)
    return tmp_path, src, RunStore(tmp_path / ".asight")


def _make_run(store_obj, src, function="MatmulBiasRelu"):
    meta = RunMeta(id=store_obj.new_run_id(function), file=str(src), function=function, state="done",
                   target={"kind": "llvm"}, trials_done=16)
    run = store_obj.create(meta)
    run.records_path.write_text("")
    return run


def test_profile_without_run_says_untuned_only(store):
    tmp, src, store_obj = store
    raw = _raw_tir(tuned_us=None)
    raw["kernels"][0].update(best=None)
    worker = FakeWorker(raw)
    out = profiles.profile_file(str(src), store_root=str(store_obj.root), worker=worker)
    assert "untuned only" in out["note"] and out["run"] is None
    params = worker.calls[0][1]
    assert params["run_dir"] is None and params["function"] is None and params["timing"] is True
    assert out["summary"]["speedup"] is None
    assert out["summary"]["baseline_us"] == pytest.approx(out["measurement"]["untuned"]["median_us"])


def test_a_run_without_a_record_is_measured_once_and_keeps_it(store):
    """The first profile of a run measures (interleaved) and the record becomes the run's headline;
    the next profiles read it, until a trial is added or --remeasure asks again."""
    tmp, src, store_obj = store
    run = _make_run(store_obj, src)
    worker = FakeWorker(_raw_tir())
    first = profiles.profile_file(str(src), store_root=str(store_obj.root), worker=worker)
    params = worker.calls[0][1]
    assert first["run"]["id"] == run.id and params["run_dir"] == str(run.path) and params["timing"] is True
    assert params["choose"] is True and params["target"] == {"kind": "llvm"}
    meta = run.load()
    assert meta.measurement["by"] == "asight profile" and meta.measurement["trials"] == 0
    assert meta.best_us == meta.measurement["tuned"]["median_us"] == first["summary"]["tuned_us"]
    assert meta.baseline_us == first["summary"]["baseline_us"]
    assert (run.path / caches.PROFILE_FILE).exists()
    again = profiles.profile_file(str(src), store_root=str(store_obj.root), worker=worker)
    assert len(worker.calls) == 1 and again.get("cached") is True
    # the cache goes, the record stays: a new profile does not time untuned vs tuned again
    (run.path / caches.PROFILE_FILE).unlink()
    worker.raw = {**_raw_tir(), "headline": {"check": _check()}}
    third = profiles.profile_file(str(src), store_root=str(store_obj.root), worker=worker)
    assert worker.calls[1][1]["timing"] is False and third["measurement"] == meta.measurement
    # --remeasure replaces the record and keeps the old one in the history
    worker.raw = _raw_tir(tuned_us=50.0)
    profiles.profile_file(str(src), store_root=str(store_obj.root), worker=worker,
                          options=profiles.ProfileOptions(remeasure=True))
    later = run.load()
    assert later.measurement["tuned"]["median_us"] == pytest.approx(50.0, rel=0.03)
    assert later.extra["measurement_history"] == [meta.measurement]


def test_an_edited_function_is_measured_but_not_kept_as_the_runs_headline(store):
    tmp, src, store_obj = store
    run = _make_run(store_obj, src)
    outline = build_outline(src.read_text(), str(src))
    run.update(source_hashes={f.id: "0" * 16 for f in outline.functions})
    worker = FakeWorker(_raw_tir())
    out = profiles.profile_file(str(src), store_root=str(store_obj.root), worker=worker)
    assert "changed since run" in out["note"] and run.load().measurement is None
    assert worker.calls[0][1]["chosen"] is None and out["summary"]["speedup"] is not None


def test_a_run_of_another_function_is_refused(store):
    tmp, src, store_obj = store
    run = _make_run(store_obj, src, function="Other.main")
    with pytest.raises(errors_mod.AsightError, match="tuned Other.main, not MatmulBiasRelu"):
        profiles.profile_file(str(src), run=run.id, store_root=str(store_obj.root), worker=FakeWorker(_raw_tir()))


def test_a_unit_tvm_rejects_is_an_input_error(store):
    tmp, src, store_obj = store
    worker = FakeWorker(_raw_tir())
    worker.problems = [{"line": 17, "col": 13, "end_col": None, "message": "undefined name", "kind": "parse",
                        "unit": "MatmulBiasRelu"}]
    with pytest.raises(errors_mod.InputError, match=r"matmul_bias_relu.py:17:13: undefined name"):
        profiles.profile_file(str(src), store_root=str(store_obj.root), worker=worker)
    assert worker.calls == []


def test_profile_run_uses_the_runs_function(store):
    tmp, src, store_obj = store
    run = _make_run(store_obj, src, function="MatmulBiasRelu.main")
    worker = FakeWorker(_raw_tir())
    out = profiles.profile_run(run, worker)
    assert out["function"] == "MatmulBiasRelu.main" and worker.calls[0][1]["function"] == "main"
    assert worker.calls[0][1]["unit"]["name"] == "MatmulBiasRelu"


def test_latest_run_matches_unit_or_function_id(store):
    tmp, src, store_obj = store
    outline = build_outline(src.read_text(), str(src))
    assert lookup.latest_run(store_obj, str(src), select(outline, None)) is None
    run = _make_run(store_obj, src, function="MatmulBiasRelu.main")
    assert lookup.latest_run(store_obj, str(src), select(outline, "main")).id == run.id
    assert lookup.latest_run(store_obj, str(src), select(outline, "MatmulBiasRelu")).id == run.id


def test_cli_output_and_exit_code_on_mismatch(store, monkeypatch, capsys):
    outline, _, _ = _mbr()
    raw = _raw_tir(check_ok=False)
    bad = attribution.finish_profile(raw, outline, select(outline, None), None, _record(raw))
    monkeypatch.setattr(profile_cmd, "profile_file", lambda *a, **k: bad)
    monkeypatch.setattr(profile_cmd, "WorkerClient", lambda *a: _NullClient())
    parser = __import__("asight_lsp.cli", fromlist=["build_parser"]).build_parser()
    args = parser.parse_args(["profile", str(FIXTURES / MBR)])
    assert args.run(args) == 1
    out = capsys.readouterr().out
    assert "OUTPUT MISMATCH" in out and "D: 7/16384 elements differ" in out
    raw = _raw_tir(busy=True)
    text = profile_cmd.render(attribution.finish_profile(raw, outline, select(outline, None), None, _record(raw)))
    assert "20× faster (95% CI" in text and "MatmulBiasRelu.main/matmul" in text and "MISMATCH" not in text
    assert "9 interleaved rounds" in text and "busy" in text and "noisy" in text


class _NullClient:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def test_peak_uses_the_clock_the_cores_reach_and_never_passes_100_percent():
    """Issue 21: the TSC (2.6 GHz, nominal) put a tuned kernel at 112 % of a znver5 peak; the cores
    ran a dependent add/xor chain at ~4.2 GHz.  The highest real clock is used and named."""
    host = {"threads": 2, "tsc_hz": 2.6e9, "cpu": "znver5", "flags": AVX512,
            "clock": {"measured_hz": 4.2e9, "cpuinfo_max_hz": 2.6e9, "scaling_max_hz": None}}
    peak = peak_rules.peak_figures(host)
    assert peak["formula"]["gflops"] == pytest.approx(64 * 4.2 * 2)
    assert peak["formula"]["clock_source"].startswith("measured") and "4.200 GHz (measured" in peak["source"]
    assert peak_rules.peak_fraction(372.3, peak) == pytest.approx(372.3 / (64 * 4.2 * 2))   # was 1.12 with the TSC
    # cpufreq's maximum wins over a measured clock slowed by load; the TSC is the last resort
    assert peak_rules.core_clock({**host, "clock": {"measured_hz": 3.0e9, "scaling_max_hz": 3.7e9}}) == \
        (pytest.approx(3.7), "cpufreq scaling_max_freq")
    assert peak_rules.core_clock({"tsc_hz": 2.6e9}) == (pytest.approx(2.6), "TSC, nominal")
    assert peak_rules.core_clock({}) is None
    # an achieved rate above any peak is capped at 100 % and the peak says it is too low
    tsc_only = peak_rules.peak_figures({**host, "clock": None})
    assert tsc_only["gflops"] == pytest.approx(64 * 2.6 * 2)
    assert peak_rules.peak_fraction(372.3, tsc_only) == 1.0
    flagged = peak_rules.exceeded(tsc_only, [("conv", 372.3), ("relu", 3.0), ("none", None)])
    assert flagged["exceeded_by"] == {"name": "conv", "gflops": 372.3} and "too low" in flagged["note"]
    assert peak_rules.exceeded(peak, [("conv", 372.3)]) is peak
