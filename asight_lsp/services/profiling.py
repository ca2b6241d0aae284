"""Profiles (TVM-free core): measure a function untuned and with its run's best schedule.

``profile_file`` / ``profile_run`` ask the TVM worker's ``profile`` handler for raw measurements
(``asight_lsp/worker/profiling.py``) and turn them into a profile tied to the source:

* each rdtsc stage of the untuned/tuned program -> the source blocks it runs (by store span,
  realize span, name, or name prefix: ``C_init``/``C_update``/``C_global`` -> ``C``), and from
  there per-source-block latency; blocks inlined by the schedule are attributed to their consumer;
* each Relax kernel call -> the source bindings it computes;
* GFLOP/s (FLOPs from the source map, cross-checked with TVM's estimate), achieved vs peak FLOP/s,
  modelled bytes moved and reuse (MetaSchedule's PerStoreFeature), cachegrind misses per line.

Every figure carries a ``source`` saying where it came from.  A profile of a run is cached as
``profile.msgpack`` in the run directory (keyed by source hash, records file and options), so the
language server and reports reuse it.  Decisions: docs/profiling.md.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import msgpack

from ..errors import AsightError
from ..tvmscript.diagnostics import check_text
from .jobs import LIVE_STATES
from ..errors import InputError
from ..tvmscript.selection import Selection, check_selection, select
from ..store.runs import Run, RunMeta, RunStore, function_hash
from ..tvmscript.outline import Block, Function, Outline, build_outline, decode_source

PROFILE_SCHEMA = "asight.profile/1"
CACHE_FILE = "profile.msgpack"
SOURCE_MAP_FLOPS = "source map: per-block op count x iterations (sourcemap.Block.flops)"
FORMULA_FLOPS_PER_CYCLE = (  # fp32 FLOP per cycle per core, assuming 2 FMA pipes (true for Zen/Skylake-SP+)
    ("avx512f", 64, "2 x 512-bit FMA"), ("fma", 32, "2 x 256-bit FMA (AVX2)"),
    ("avx", 16, "256-bit add + mul"), ("sse2", 8, "128-bit add + mul"))


@dataclass
class ProfileOptions:
    """What to measure (the CLI flags; the LSP uses the defaults)."""
    repeats: int = 10          # single calls at least; more when they fit in budget_ms
    budget_ms: float = 300.0   # time per program for the headline timing
    check: bool = True
    stages: bool = True
    features: bool = True
    cachegrind: bool = False
    rtol: float = 1e-3
    atol: float = 1e-4
    seed: int = 0
    timeout: float = 900.0

    def worker_params(self) -> dict:
        params = asdict(self)
        params.pop("timeout")
        return params


# --------------------------------------------------------------------------- entry points


def profile_file(path: str, function: str | None = None, run: str | None = None, store_root: str | None = None,
                 worker=None, options: ProfileOptions | None = None, text: str | None = None,
                 candidate: str | None = None, use_cache: bool = True) -> dict:
    """Profile ``function`` of ``path`` against a run's best schedule.

    ``run`` is a run id/prefix/dir or ``latest``; None = the newest run of this file and function
    in the store (no run at all: untuned only, and the profile says so).  ``candidate`` is the path
    of a file holding a scheduled version of the function, compared instead of a run (a check of a
    hand-edited or applied schedule).  ``text`` replaces the file's content (unsaved editor text).
    """
    text = _read(path) if text is None else text
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection)
    store = RunStore(store_root)
    found = None
    if candidate is None:
        found = store.get(run) if run else latest_run(store, path, selection)
        if run:
            _check_run_function(found, selection)
    return _profile(text, path, outline, selection, found, worker, options or ProfileOptions(),
                    candidate=candidate, use_cache=use_cache)


def profile_run(run: Run, worker) -> dict:
    """Profile the function a run tuned, with default options (``asight demo`` and reports).

    Uses the file as it is when its function still hashes as tuned, else the run's source snapshot.
    """
    meta = run.load()
    text, path = _run_source(run, meta)
    outline = build_outline(text, path)
    selection = select(outline, meta.function)
    check_selection(outline, selection)
    return _profile(text, path, outline, selection, run, worker, ProfileOptions(), candidate=None, use_cache=True)


def load_profile(run: Run) -> dict | None:
    """The profile cached in a run directory (whatever its key), or None."""
    try:
        data = msgpack.unpackb((run.path / CACHE_FILE).read_bytes(), raw=False, strict_map_key=False)
    except (FileNotFoundError, ValueError, msgpack.UnpackException):
        return None
    return data.get("profile") if isinstance(data, dict) else None


def apply_best(path: str, function: str | None = None, run: str | None = None, store_root: str | None = None,
               worker=None, text: str | None = None) -> dict:
    """The best schedule of a run applied to the function: scheduled TVMScript and trace per function."""
    text = _read(path) if text is None else text
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection)
    store = RunStore(store_root)
    found = store.get(run) if run else latest_run(store, path, selection)
    if found is None:
        raise AsightError(f"no run of {selection.label} in {store.runs_dir}: tune it first")
    _check_run_function(found, selection)
    meta = _prepare_run(found)
    params = {**_unit_params(text, outline, selection), "run_dir": str(found.path), "target": meta.target}
    with _worker(worker) as client:
        reply = client.request("apply_best", params, timeout=300)
    return {"run": found.id, "function": selection.label, **reply}


def _check_run_function(run: Run, selection: Selection) -> None:
    """A run given by id must have tuned the selected function (or its unit)."""
    tuned = run.load().function
    names = {selection.label, selection.unit.name, *(f.id for f in selection.functions)}
    if tuned not in names:
        raise AsightError(f"run {run.id} tuned {tuned}, not {selection.label}; pick the function with --func")


def latest_run(store: RunStore, path: str, selection: Selection) -> Run | None:
    """The newest run of this file whose function is the selection (its label, a function id, the unit)."""
    names = {selection.label, selection.unit.name, *(f.id for f in selection.functions)}
    metas = [m for m in (store.latest_for(path, name) for name in names) if m is not None]
    if not metas:
        return None
    newest = max(metas, key=lambda m: m.created)
    return Run(store.runs_dir / newest.id)


# --------------------------------------------------------------------------- orchestration


def _profile(text: str, path: str, outline: Outline, selection: Selection, run: Run | None, worker,
             options: ProfileOptions, candidate: str | None, use_cache: bool) -> dict:
    meta = _prepare_run(run) if run is not None else None
    key = _cache_key(text, selection, run, options)
    if run is not None and use_cache:
        cached = _cached(run, key)
        if cached is not None:
            return cached
    params = {**_unit_params(text, outline, selection), **options.worker_params(),
              "run_dir": str(run.path) if run else None, "target": meta.target if meta else None}
    started = time.time()
    with _worker(worker) as client:
        check_unit(text, path, selection, client)
        if candidate is not None:
            params["candidate"] = _candidate_params(candidate, client)
        raw = client.request("profile", params, timeout=options.timeout)
    profile = finish_profile(raw, outline, selection, meta, run)
    profile.update(file=os.path.abspath(path), created=started, cache_key=key,
                   candidate=os.path.abspath(candidate) if candidate else None)
    if candidate is None and run is None:
        profile["note"] = "no tuning run of this function: untuned only (tune it with `asight tune`)"
    elif meta is not None and meta.state in LIVE_STATES:
        profile["note"] = f"run {meta.id} is still tuning: best schedule so far"
    if run is not None and candidate is None:
        _store(run, key, profile)
    return profile


def _prepare_run(run: Run) -> RunMeta:
    """Load the run; make a finished run's JSON DB loadable by TVM (drops a torn last line)."""
    meta = run.load()
    if meta.state not in LIVE_STATES:
        run.repair_db()
    return meta


def _unit_params(text: str, outline: Outline, selection: Selection) -> dict:
    unit = selection.unit
    return {"text": text, "constants": outline.constants, "aliases": outline.aliases,
            "unit": {"name": unit.name, "start_line": unit.start_line, "end_line": unit.end_line, "kind": unit.kind},
            "function": selection.member}


def check_unit(text: str, path: str, selection: Selection, worker) -> None:
    """Refuse a unit TVM cannot parse or verify: ``InputError`` (CLI exit 1) at the first error."""
    unit = selection.unit
    for diag in check_text(text, path, worker).diagnostics:
        start = diag["range"]["start"]
        if diag["severity"] == "error" and unit.start_line <= start["line"] <= unit.end_line:
            raise InputError(f"{path}:{start['line'] + 1}:{start['character'] + 1}: {diag['message']}")


def _candidate_params(path: str, worker) -> dict:
    text = _read(path)
    outline = build_outline(text, path)
    selection = select(outline, None)  # the candidate file's only unit, holding one PrimFunc
    check_selection(outline, selection)
    check_unit(text, path, selection, worker)
    return _unit_params(text, outline, selection)


def _run_source(run: Run, meta: RunMeta) -> tuple[str, str]:
    """(text, path): the file if its functions still hash as tuned, else the run's snapshot."""
    try:
        text = _read(meta.file)
        outline = build_outline(text, meta.file)
        hashes = {f.id: function_hash(text, f) for f in outline.functions if f.id in meta.source_hashes}
        if hashes == meta.source_hashes:
            return text, meta.file
    except AsightError:
        pass
    if run.source_path.exists():
        return decode_source(run.source_path.read_bytes()), meta.file
    raise AsightError(f"run {run.id}: {meta.file} changed since tuning and the run has no source snapshot")


def _read(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise AsightError(f"no such file: {path}" if not file.exists() else f"{path} is not a file")
    try:
        return decode_source(file.read_bytes())
    except OSError as err:
        raise AsightError(f"cannot read {path}: {err.strerror}") from None


class _worker:
    """Use the caller's WorkerClient, or a fresh one closed afterwards."""

    def __init__(self, worker):
        self.given, self.client = worker, worker

    def __enter__(self):
        if self.client is None:
            from ..engine.client import WorkerClient
            self.client = WorkerClient()
        return self.client

    def __exit__(self, *exc):
        if self.given is None and self.client is not None:
            self.client.close()


# --------------------------------------------------------------------------- cache


def _cache_key(text: str, selection: Selection, run: Run | None, options: ProfileOptions) -> dict:
    records = run.records_path if run is not None else None
    stat = records.stat() if records is not None and records.exists() else None
    return {"function": selection.label,
            "source": {f.id: function_hash(text, f) for f in selection.functions},
            "records": [stat.st_size, stat.st_mtime_ns] if stat else None,
            "options": options.worker_params(), "schema": PROFILE_SCHEMA}


def _cached(run: Run, key: dict) -> dict | None:
    profile = load_profile(run)
    if profile is not None and profile.get("cache_key") == key:
        profile["cached"] = True
        return profile
    return None


def _store(run: Run, key: dict, profile: dict) -> None:
    """Write ``profile.msgpack`` atomically; a store that cannot be written only loses the cache."""
    try:
        tmp = run.path / f"{CACHE_FILE}.tmp{os.getpid()}"
        tmp.write_bytes(msgpack.packb({"key": key, "profile": profile}, use_bin_type=True))
        os.replace(tmp, run.path / CACHE_FILE)
    except OSError:
        pass


# --------------------------------------------------------------------------- post-processing (pure)


def finish_profile(raw: dict, outline: Outline, selection: Selection, meta: RunMeta | None,
                   run: Run | None = None) -> dict:
    """The worker's raw measurements tied to source ids and ranges, with derived figures."""
    peak = peak_figures(raw.get("host") or {}, _cpu_flags())
    profile = {"schema": PROFILE_SCHEMA, "function": selection.label, "kind": raw.get("kind"),
               "target": raw.get("target"), "host": raw.get("host"), "peak": peak,
               "run": _run_summary(run, meta), "options": raw.get("options"), "seconds": raw.get("seconds")}
    if raw.get("kind") == "relax":
        fn = _relax_function(outline, selection, raw["relax"].get("name"))
        profile["relax"] = finish_relax(raw["relax"], fn, peak)
        parts = [profile["relax"]]
    else:
        profile["kernels"] = [finish_kernel(k, _kernel_function(outline, selection, k["name"]), peak)
                              for k in raw.get("kernels", [])]
        parts = profile["kernels"]
    profile["summary"] = summarize(parts, peak)
    return profile


def _run_summary(run: Run | None, meta: RunMeta | None) -> dict | None:
    if meta is None:
        return None
    return {"id": meta.id, "dir": str(run.path) if run else None, "state": meta.state,
            "trials": meta.trials_done, "best_us": meta.best_us, "baseline_us": meta.baseline_us,
            "target": meta.target_label or meta.target}


def _kernel_function(outline: Outline, selection: Selection, name: str) -> Function | None:
    if len(selection.functions) == 1:
        return selection.functions[0]
    return next((f for f in selection.functions if f.name == name), None)


def _relax_function(outline: Outline, selection: Selection, name: str | None) -> Function | None:
    relax_fns = [f for f in selection.functions if f.kind == "relax_function"]
    return next((f for f in relax_fns if f.name == (name or "main")), relax_fns[0] if relax_fns else None)


def summarize(parts: list[dict], peak: dict) -> dict:
    """Whole-function figures: sums over kernels (one kernel: its own)."""
    def total(label):
        values = [p.get(label, {}) or {} for p in parts]
        if not values or any("median_us" not in v for v in values):
            return None
        return sum(v["median_us"] for v in values)
    base, tuned = total("baseline"), total("tuned")
    flops = [p.get("flops", {}).get("value") for p in parts]
    flops_total = sum(flops) if flops and all(f is not None for f in flops) else None
    checks = [p["check"]["ok"] for p in parts if p.get("check")]
    out = {"baseline_us": base, "tuned_us": tuned, "speedup": (base / tuned) if base and tuned else None,
           "check_ok": all(checks) if checks else None, "flops": flops_total,
           "source": "sum over kernels of the median single-call latency" if len(parts) > 1 else
           "median single-call latency (tvm time_evaluator)"}
    for label, us in (("baseline", base), ("tuned", tuned)):
        out[f"gflops_{label}"] = flops_total / us / 1e3 if flops_total and us else None
        out[f"peak_fraction_{label}"] = (out[f"gflops_{label}"] / peak["gflops"]
                                         if out[f"gflops_{label}"] and peak.get("gflops") else None)
    return out


def finish_kernel(raw: dict, fn: Function | None, peak: dict) -> dict:
    """One PrimFunc: latencies, check, FLOPs and GFLOP/s, stages and blocks tied to the source."""
    blocks = [b for b in (fn.blocks if fn else []) if b.name != "root"]
    flops = kernel_flops(blocks, raw.get("flops"))
    out = {"name": raw["name"], "function": fn.id if fn else raw["name"], "range": fn.range if fn else None,
           "baseline": raw.get("baseline"), "tuned": raw.get("tuned"), "best": raw.get("best"),
           "check": raw.get("check"), "notes": list(raw.get("notes") or []), "flops": flops}
    base, tuned = (raw.get("baseline") or {}).get("median_us"), (raw.get("tuned") or {}).get("median_us")
    out["speedup"] = base / tuned if base and tuned else None
    out["gflops"] = {label: (flops["value"] / us / 1e3 if flops["value"] and us else None)
                     for label, us in (("baseline", base), ("tuned", tuned))}
    out["gflops"]["source"] = "FLOPs / median latency"
    out["peak_fraction"] = {label: (g / peak["gflops"] if g and peak.get("gflops") else None)
                            for label, g in out["gflops"].items() if label != "source"}
    out["stages"], out["blocks"] = {}, {}
    for label, stage_data in (raw.get("stages") or {}).items():
        if "error" in stage_data:
            out["stages"][label] = stage_data
            continue
        out["stages"][label] = map_stages(stage_data, blocks)
        out["blocks"][label] = attribute_blocks(out["stages"][label]["stages"], blocks, fn.id if fn else "")
    out["memory"] = {label: (memory_figures(f, blocks) if "rows" in f else f)
                     for label, f in (raw.get("features") or {}).items()}
    if raw.get("cachegrind"):
        out["cachegrind"] = {label: (cachegrind_by_block(c, blocks) if "lines" in c else c)
                             for label, c in raw["cachegrind"].items()}
    return out


def kernel_flops(blocks: list[Block], tvm_estimate: float | None) -> dict:
    """FLOPs of a function: the source map's per-block counts, else TVM's estimate."""
    counted = [b.flops for b in blocks]
    if counted and all(f is not None for f in counted):
        return {"value": float(sum(counted)), "source": SOURCE_MAP_FLOPS, "tvm_estimate": tvm_estimate}
    return {"value": tvm_estimate, "source": "tvm.s_tir.analysis.estimate_tir_flops", "tvm_estimate": tvm_estimate}


# -- stages -> source blocks


def _contains(block: Block, line0: int) -> bool:
    return block.range["start"]["line"] <= line0 <= block.range["end"]["line"]


def _innermost(blocks: list[Block], line0: int) -> Block | None:
    inside = [b for b in blocks if _contains(b, line0)]
    return min(inside, key=lambda b: b.range["end"]["line"] - b.range["start"]["line"]) if inside else None


def match_block(name: str, store_lines: list[int], realize_lines: list[int] | None,
                blocks: list[Block]) -> tuple[Block | None, str]:
    """The source block a (possibly transformed) block comes from, and the evidence.

    Lines are TVMScript's 1-based span lines.  Order: a store statement's span (spans survive
    MetaSchedule, tvm-notes §1), the block realize's span, the exact name, then the longest source
    name that prefixes it (``C_init``/``C_update``/``C_global``/``C_local`` -> ``C``).
    """
    for line in store_lines or []:
        found = _innermost(blocks, line - 1)
        if found is not None:
            return found, "store span"
    if realize_lines:
        found = _innermost(blocks, realize_lines[0] - 1)
        if found is not None:
            return found, "block span"
    exact = [b for b in blocks if b.name == name]
    if exact:
        return exact[0], "name"
    prefixed = [b for b in blocks if name.startswith(b.name + "_")]
    if prefixed:
        return max(prefixed, key=lambda b: len(b.name)), "name prefix"
    return None, "unmatched"


def map_stages(data: dict, blocks: list[Block]) -> dict:
    """Stage list with each transformed block tied to a source block id and 0-based lines."""
    total = data.get("sum_us") or 0.0
    stages = []
    for stage in data["stages"]:
        mapped, ids = [], []
        for blk in stage["blocks"]:
            src, evidence = match_block(blk["name"], blk.get("store_lines") or [], blk.get("realize_lines"), blocks)
            mapped.append({"name": blk["name"], "source": src.id if src else None, "evidence": evidence})
            if src is not None and src.id not in ids:
                ids.append(src.id)
        srcs = [b for b in blocks if b.id in ids]
        lines = [min(b.range["start"]["line"] for b in srcs), max(b.range["end"]["line"] for b in srcs)] if srcs else None
        stages.append({"index": stage["index"], "us": stage["us"], "p25_us": stage.get("p25_us"),
                       "p75_us": stage.get("p75_us"), "share": stage["us"] / total if total else None,
                       "blocks": mapped, "source_blocks": ids, "lines": lines, "loop_kinds": stage.get("loop_kinds")})
    whole = data.get("whole_us")
    return {"stages": stages, "sum_us": data.get("sum_us"), "whole_us": whole, "ratio": data.get("ratio"),
            "plain_us": data.get("plain_us"), "intrusion": data.get("intrusion"),
            "intrusion_source": data.get("intrusion_source"),
            "outside_us": (whole - total) if whole is not None else None, "calls": data.get("calls"),
            "source": data.get("source"), "whole_source": data.get("whole_source")}


def attribute_blocks(stages: list[dict], blocks: list[Block], fn_id: str = "") -> list[dict]:
    """Per source block: latency, share, stage and how it was attributed.

    A stage that runs one source block gives it its time.  A stage that fused several (compute_at,
    reverse_compute_at) splits its time by the blocks' FLOPs (an estimate, flagged).  A block found
    in no stage was inlined: it points at the consumer block whose stage computes it.
    """
    total = sum(s["us"] for s in stages) or None
    out: dict[str, dict] = {}
    for stage in stages:
        ids = stage["source_blocks"]
        members = [b for b in blocks if b.id in ids]
        weights = [max(b.flops or 0, 0) for b in members]
        split = len(members) > 1
        if not sum(weights):
            weights = [1] * len(members)
        for blk, weight in zip(members, weights):
            us = stage["us"] * weight / sum(weights)
            entry = out.setdefault(blk.id, {"id": blk.id, "name": blk.name, "range": blk.range, "stages": [],
                                            "us": 0.0, "attribution": "stage"})
            entry["stages"].append(stage["index"])
            entry["us"] += us
            if split:
                entry["attribution"] = "stage shared with " + ", ".join(
                    b.name for b in members if b.id != blk.id) + " (split by FLOPs)"
    for blk in blocks:
        if blk.id not in out:
            consumer = _consumer(blk, blocks, out)
            out[blk.id] = {"id": blk.id, "name": blk.name, "range": blk.range, "stages": [], "us": 0.0,
                           "attribution": f"inlined into {consumer.name}" if consumer else "not found",
                           "inlined_into": consumer.id if consumer else None}
    ordered = [out[b.id] for b in blocks]
    for entry in ordered:
        entry["share"] = entry["us"] / total if total else None
    return ordered


def _consumer(blk: Block, blocks: list[Block], placed: dict, depth: int = 0) -> Block | None:
    """The first block reading what ``blk`` writes that has a stage (following inlined chains)."""
    if depth > len(blocks):
        return None
    for other in blocks:
        if other.id != blk.id and set(other.reads) & set(blk.writes):
            if other.id in placed:
                return other
            deeper = _consumer(other, blocks, placed, depth + 1)
            if deeper is not None:
                return deeper
    return None


# -- hardware-metric figures


def _cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return set()
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return set(match.group(1).split()) if match else set()


def peak_figures(host: dict, flags: set[str]) -> dict:
    """Peak fp32 FLOP/s: measured (numpy sgemm) and by formula; the larger one is used."""
    threads = int(host.get("threads") or 1)
    ghz = (host.get("tsc_hz") or 0) / 1e9
    formula = None
    for flag, per_cycle, how in FORMULA_FLOPS_PER_CYCLE:
        if flag in flags and ghz:
            formula = {"gflops": per_cycle * ghz * threads, "flops_per_cycle": per_cycle, "ghz": ghz, "cores": threads,
                       "source": f"formula: {per_cycle} fp32 FLOP/cycle/core ({how}, from /proc/cpuinfo flags) "
                                 f"x {ghz:.3f} GHz (TSC, nominal) x {threads} threads"}
            break
    measured = host.get("sgemm")
    candidates = [c for c in (measured, formula) if c and c.get("gflops")]
    best = max(candidates, key=lambda c: c["gflops"]) if candidates else None
    return {"gflops": best["gflops"] if best else None, "source": best["source"] if best else "unknown",
            "measured": measured, "formula": formula,
            "note": "peak = the larger of the measured reference and the formula (turbo clocks exceed the TSC rate)"}


# PerStoreFeature layout (upstream per_store_feature.cc; same as analysis/featurelayout.py): group 1 starts
# with 16 op counts (float_mad, add_sub, mul, div_mod, cmp, math_func, other_func, int ...), group 2
# (offset 57) holds 5 buffers x 18 access features.  Every count is stored as sign(x)*log2(|x|+1).
FEATURE_FLOAT_OPS = range(0, 6)
FEATURE_GROUP2, FEATURE_BUFFERS = 57, 5
FEATURE_BUFFER_FIELDS = ["read", "write", "readwrite", "bytes", "unique_bytes", "lines", "unique_lines",
                         "reuse_loop", "reuse_serial", "reuse_none", "reuse_dis_iter", "reuse_dis_bytes",
                         "reuse_ct", "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
                         "unique_lines_d_reuse_ct", "stride"]


def _unslog(value: float) -> float:
    return (1.0 if value >= 0 else -1.0) * (2.0 ** abs(value) - 1.0)


def _round(value: float) -> float:
    """6 significant digits: feature values come back through log2/exp2 with float noise."""
    return float(f"{value:.6g}")


def memory_figures(features: dict, blocks: list[Block]) -> dict:
    """Modelled bytes moved and reuse per written buffer, from PerStoreFeature rows."""
    rows, stores = features.get("rows") or [], features.get("stores") or []
    out = []
    for i, row in enumerate(rows):
        raw = [_unslog(v) for v in row]
        buffers = []
        for b in range(FEATURE_BUFFERS):
            base = FEATURE_GROUP2 + b * len(FEATURE_BUFFER_FIELDS)
            vals = {f: _round(raw[base + j]) for j, f in enumerate(FEATURE_BUFFER_FIELDS)}
            if not any(vals[f] for f in ("read", "write", "readwrite")):
                continue
            access = "readwrite" if vals["readwrite"] else "write" if vals["write"] else "read"
            reuse = "loop" if vals["reuse_loop"] else "serial" if vals["reuse_serial"] else "none"
            buffers.append({"access": access, "bytes": vals["bytes"], "unique_bytes": vals["unique_bytes"],
                            "lines": vals["lines"], "unique_lines": vals["unique_lines"], "reuse": reuse,
                            "reuse_count": vals["reuse_ct"], "reuse_distance_bytes": vals["reuse_dis_bytes"],
                            "stride": vals["stride"]})
        flops = _round(sum(raw[j] for j in FEATURE_FLOAT_OPS))
        moved = sum(b["bytes"] for b in buffers)
        unique = sum(b["unique_bytes"] for b in buffers)
        store = stores[i] if i < len(stores) else None
        src, _ = match_block(store, [], None, blocks) if store else (None, "")
        out.append({"store": store, "source": src.id if src else None, "flops": flops, "bytes": moved,
                    "unique_bytes": unique, "reuse": _round(moved / unique) if unique else None,
                    "intensity": _round(flops / unique) if unique else None, "buffers": buffers})
    return {"rows": out, "source": features.get("source", "MetaSchedule PerStoreFeature"),
            "note": "modelled by MetaSchedule from the loop nest (not measured); bytes = touched bytes, "
                    "reuse = touched / unique bytes"}


def cachegrind_by_block(data: dict, blocks: list[Block]) -> dict:
    """cachegrind counters per TVMScript line, and summed per source block."""
    per_block: dict[str, dict] = {}
    lines = []
    for entry in data["lines"]:
        blk = _innermost(blocks, entry["line"] - 1) if entry["line"] > 0 else None
        line = dict(entry, block=blk.id if blk else None)
        lines.append(line)
        if blk is not None:
            agg = per_block.setdefault(blk.id, {"id": blk.id, "name": blk.name})
            for key, value in entry.items():
                if key != "line":
                    agg[key] = agg.get(key, 0) + value
    return {"lines": lines, "blocks": list(per_block.values()), "source": data.get("source"),
            "cache": data.get("cache"), "seconds": data.get("seconds")}


# -- Relax


def finish_relax(raw: dict, fn: Function | None, peak: dict) -> dict:
    """Relax: end-to-end latency and each kernel call tied to the source bindings it computes."""
    bindings = {b.name: b for b in (fn.bindings if fn else [])}
    fn_id = fn.id if fn else raw.get("name", "main")
    out = {"function": fn_id, "range": fn.range if fn else None, "baseline": raw.get("baseline"),
           "tuned": raw.get("tuned"), "check": raw.get("check"), "notes": list(raw.get("notes") or []),
           "flops": {"value": raw.get("flops"), "source": raw.get("flops_source")},
           "task_records": raw.get("task_records"), "tasks": {}}
    base, tuned = (raw.get("baseline") or {}).get("median_us"), (raw.get("tuned") or {}).get("median_us")
    out["speedup"] = base / tuned if base and tuned else None
    for label, data in (raw.get("tasks") or {}).items():
        total = data.get("sum_us") or None
        tasks = []
        for task in data["tasks"]:
            found = [bindings[v] for v in task.get("vars", []) if v in bindings]
            lines = [b.range["start"]["line"] for b in found]
            tasks.append({**task, "bindings": [f"{fn_id}/{b.name}" for b in found],
                          "lines": [min(lines), max(b.range["end"]["line"] for b in found)] if found else None,
                          "share": task["us"] / total if total else None,
                          "gflops": task["flops"] / task["us"] / 1e3 if task.get("flops") and task["us"] else None})
        out["tasks"][label] = {"tasks": tasks, "sum_us": data.get("sum_us"), "whole_us": data.get("whole_us"),
                               "instrumented_run_us": data.get("instrumented_run_us"), "source": data.get("source")}
        out.setdefault("bindings", {})[label] = _binding_latency(tasks, bindings, fn_id)
    return out


def _binding_latency(tasks: list[dict], bindings: dict, fn_id: str) -> list[dict]:
    """Per source binding: the kernel call(s) that compute it and their latency."""
    out = []
    for name, b in bindings.items():
        covering = [t for t in tasks if name in t.get("vars", [])]
        out.append({"id": f"{fn_id}/{name}", "name": name, "range": b.range,
                    "tasks": [f"{t['task']}#{t['call']}" for t in covering],
                    "us": sum(t["us"] for t in covering),
                    "fused_with": sorted({v for t in covering for v in t.get("vars", []) if v != name})})
    return out


def profile_blocks(profile: dict | None, fn: Function) -> dict | None:
    """``{block name: {us, share, source}}`` of one function in a profile (tuned program first)."""
    if not isinstance(profile, dict):
        return None
    kernel = next((k for k in profile.get("kernels") or [] if k.get("function") in (fn.id, fn.name)), None)
    if kernel is None:
        return None
    blocks = kernel.get("blocks") or {}
    label = "tuned" if blocks.get("tuned") else "baseline"
    entries = blocks.get(label) or []
    stage_source = ((kernel.get("stages") or {}).get(label) or {}).get("source") or "profile"
    out = {}
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name"):
            note = entry.get("attribution", "stage")
            out[entry["name"]] = {"us": entry.get("us"), "share": entry.get("share"), "program": label,
                                  "source": f"{label} program, {stage_source}" + ("" if note == "stage" else f"; {note}")}
    return out or None
