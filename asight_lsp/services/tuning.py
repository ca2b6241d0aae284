"""Start a tuning run (TVM-free): validate a request, create or resume a run, spawn its job.

``start_tune(TuneRequest(...))`` checks the request statically (syntax and the safety gate: a
file's code is never executed; unknown function -> ``AsightError`` listing the functions), creates
``<store>/runs/<id>/`` (or resumes the run of the same file, function, source hashes and target),
starts ``python -m asight_lsp.worker.tune_job RUN_DIR`` in its own process group and returns a
``jobs.TuneJob`` handle at once.  Decisions: ``docs/tuning.md``.

Budget semantics: ``trials`` is the run's total.  Records already in a resumed run count toward
it, so an interrupted run continues where it stopped and re-running a finished request is a no-op
(raise ``trials`` to tune further, or pass ``resume=False`` for a fresh run).
"""
from __future__ import annotations

import difflib
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from ..analysis.levers import LEVERS_OFF_ENV, PIPELINE, levers_off
from ..analysis.budget import TRIAL_CEILING, minutes_problem
from ..store.record import Levers, TimeBudget
from ..engine.target_tags import TAGS, TVM_VERSION as TAGS_TVM_VERSION
from ..engine.rpc import parse_rpc, reach_tracker
from ..engine.targets import (GPU_WORD, TargetError, device_missing, gpu_label, local_gpus, require_runs_here,
                              runs_on_device, target_config)
from ..errors import AsightError
from ..store.database import require_intact
from ..store.runs import Run, RunMeta, RunStore, read_records
from ..tvmscript.hashing import function_hash
from ..tvmscript.model import Outline
from ..tvmscript.outline import build_outline
from ..tvmscript.selection import Selection, check_selection, select
from .counters import budget_seconds
from .guidance import plan_guidance, seed_from
from .jobs import LIVE_STATES, TuneJob, file_size, refresh_run, spawn

# Target kinds TVM 0.27 knows (tvm.target.Target.list_kinds()); tags such as "nvidia/..." also pass.
TARGET_KINDS = ("llvm", "c", "cuda", "nvptx", "rocm", "vulkan", "metal", "opencl", "webgpu", "hexagon",
                "ext_dev", "composite", "trn")


@dataclass
class TuneRequest:
    file: str                      # path of the TVMScript file
    function: str | None = None    # function id/name ("Mod.main", "main") or unit name; None = the only unit
    target: str | None = None      # None = host CPU; "cuda"; "llvm -mcpu=..."; Target JSON text
    trials: int | None = 64        # None with ``minutes``: the time alone bounds the session
    store_root: str | None = None  # .asight dir; None = default_store_root()
    rpc: str | None = None         # "HOST:PORT:KEY" of a TVM RPC tracker
    text: str | None = None        # unsaved editor text to tune instead of the file content (LSP)
    guided_by: str | None = None   # run whose design principles steer this one (a fresh run, seeded with its records)
    principles_file: str | None = None  # JSON principles/constraints to guide by instead of the mined ones
    seed: int | None = None
    resume: bool = True            # reuse the run of the same function + source hash + target
    space: str | None = None       # a design space function of the file (docs/spaces.md): runs user code
    space_mode: str = "alone"      # alone: only that space; union: with MetaSchedule's default rules
    counters_budget_s: float | None = None   # GPU: Nsight Compute counters after tuning, within this budget
    minutes: float | None = None   # the session's time budget: search until then, then measure (--minutes)
    compare_onnx: str | None = None   # an ONNX file: onnxruntime timed once at the start, shown beside the estimate


# --------------------------------------------------------------------------- validation


def check_target(target: str | None) -> str:
    """A stable label for the target (resume key); AsightError for a kind TVM does not know.

    The full check (attributes) happens in the job with TVM; this catches typos before a job starts.
    """
    if target is None or not target.strip() or target.strip() == "host":
        return host_label()
    text = target.strip()
    if text == GPU_WORD:
        return gpu_label(local_gpus()[0])
    if text.startswith(("/", "./", "../", "~")) or text.endswith(".json"):
        raise AsightError(f"unknown target '{text}': a file path is not a target; pass the Target JSON itself "
                          "(--target \"$(cat FILE)\"), a kind or a tag")
    config = target_config(text)
    kind = config if isinstance(config, str) else str(config["kind"])
    if kind == "llvm":
        require_runs_here(config.get("mtriple"))
    if text.startswith("{"):
        label = json.dumps(config, sort_keys=True, separators=(",", ":"))
    else:
        label = " ".join(text.split())
    if kind not in TARGET_KINDS and "/" not in kind:
        raise AsightError(f"unknown target '{text}': the kind must be one of {', '.join(TARGET_KINDS)} "
                          "(or a Target JSON / tag)")
    if "/" in kind and kind not in TAGS:   # before the GPU check: a misspelt tag is not "no NVIDIA GPU"
        near = difflib.get_close_matches(kind, sorted(TAGS), n=3)
        raise AsightError(f"unknown target tag '{kind}': TVM {TAGS_TVM_VERSION} has no such tag"
                          + (f" (near: {', '.join(near)})" if near else "") + "; or name a kind (cuda, llvm, ...) "
                          "or a Target JSON")
    _require_tunable(kind)
    if kind == "llvm" and "mcpu" not in label and "mtriple" not in label:
        return host_label()        # the job fills in the host's mcpu and num-cores
    return label


NOT_TUNED = {"nvptx": "nvptx is TVM's LLVM back end for NVIDIA GPUs; ASight tunes an NVIDIA GPU with --target "
                      "cuda (or gpu, or an nvidia/... tag)",
             "hexagon": "", "ext_dev": "", "composite": "", "trn": ""}


def _require_tunable(kind: str) -> None:
    """Kinds TVM knows that no tuning job here measures: refused before a run is made (else ``tune
    --target nvptx`` fails in the job, with words for a CPU)."""
    if kind in NOT_TUNED:
        raise AsightError(NOT_TUNED[kind] or f"ASight does not tune {kind} targets (it tunes llvm CPUs and "
                          "cuda, rocm, vulkan, opencl and metal GPUs)")


def host_label() -> str:
    """The host CPU (model name and usable cores): the default target's resume key."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"host:{model}:{_cores()}"


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def guided_target(store: RunStore, guided_by: str, target: str | None) -> str | None:
    """A guided run tunes on its base run's target: its records seed the new run, and records of
    another target would mix an H100's 0.13 ms with this CPU's 130 ms (the editor's Re-tune lens on an
    adopted GPU run would tune the host CPU and headline the GPU's figure)."""
    base = store.get(guided_by).load()
    spec = (base.extra or {}).get("target_spec") or (json.dumps(base.target) if isinstance(base.target, dict) else None)
    if target is None:
        return spec
    if runs_on_device(target) != runs_on_device(base.target or spec):
        raise AsightError(f"run {base.id} was tuned for {base.target_label or spec or 'this CPU'}: a guided run "
                          f"tunes on the same target, its records seed it (got --target {target}; leave it out)")
    return target


def require_gpu_here(target: str | None, rpc: str | None) -> None:
    """A device target measures on this machine's device unless ``--rpc`` names one: where the device's
    absence shows without TVM (nvidia-smi, device and driver files: ``targets.device_missing``), it is
    refused before a run is made (no failed run left behind to hide an earlier one)."""
    text = (target or "").strip()
    if rpc or not text:
        return
    config = target_config(text) if text.startswith("{") else None
    kind = (config.get("kind") if isinstance(config, dict) else "cuda" if text == GPU_WORD or text.startswith("nvidia/")
            else text.split()[0])
    if kind == "cuda" and text != GPU_WORD:     # --target gpu asked nvidia-smi in check_target
        try:
            local_gpus()
        except TargetError as err:
            why = str(err).split(": ", 1)[-1].split(";")[0]
            raise AsightError(f"{why}: a cuda target is tuned on its GPU; tune where it is, or measure on one with "
                              "--rpc HOST:PORT:KEY") from None
    why = device_missing(str(kind))
    if why:
        device = "GPU" if kind in ("cuda", "rocm") else "device"
        raise AsightError(f"{why}: {'an' if str(kind)[:1] in 'aeiou' else 'a'} {kind} target is tuned on its "
                          f"{device}; tune where it is, or measure on one with --rpc HOST:PORT:KEY")


def check_rpc(rpc: str | None) -> None:
    """``HOST:PORT:KEY``, and a tracker that answers there: an unreachable one is refused before a run is
    made (the job's own check would leave a failed run that hides the adopted one)."""
    if rpc is None:
        return
    try:
        host, port, _key = parse_rpc(rpc)
        reach_tracker(host, port)
    except (ValueError, ConnectionError) as err:
        raise AsightError(str(err)) from None


# --------------------------------------------------------------------------- processes


# --------------------------------------------------------------------------- start


def check_levers() -> None:
    """An ``ASIGHT_LEVERS_OFF`` typo is refused before a run is made (the job would fail with it)."""
    try:
        levers_off(os.environ.get(LEVERS_OFF_ENV))
    except ValueError as err:
        raise AsightError(str(err)) from None


def selection_names(outline, selection) -> tuple:
    """Other names of the selected function: its id, and its unit's name when the unit holds only it
    (a run tuned without ``--func`` is named by the unit: the editor's Re-tune lens names the function)."""
    ids = tuple(f.id for f in selection.functions)
    alone = [f.id for f in outline.functions if f.unit == selection.unit.name] == list(ids)
    return ids + ((selection.unit.name,) if alone else ())


def start_tune(req: TuneRequest) -> TuneJob:
    """Validate, create or resume the run, spawn the job in its own process group; return at once."""
    text = _request_text(req)
    outline = build_outline(text, req.file)
    space = user_space(text, outline, req) if req.space else None
    function = req.function or (space or {}).get("applies_to")
    selection = select(outline, function)
    check_selection(outline, selection)
    if space:
        check_space_selection(selection, space)
    store = RunStore(req.store_root)
    target = guided_target(store, req.guided_by, req.target) if req.guided_by else req.target
    label = check_target(target)
    check_rpc(req.rpc)
    require_gpu_here(target, req.rpc)
    check_levers()
    trials = session_trials(req)
    hashes = {fn.id: function_hash(text, fn) for fn in selection.functions}
    file = os.path.abspath(req.file)
    guidance = plan_guidance(store, req.guided_by, selection.label, req.principles_file,
                             aliases=selection_names(outline, selection)) if req.guided_by else None
    resumable = req.resume and guidance is None  # a guided run never continues its base run
    run = _resumable(store, file, selection.label, hashes, label, outline.constants, space) if resumable else None
    meta = run.load() if run else RunMeta(id=store.new_run_id(selection.label), file=file,
                                          function=selection.label, source_hashes=hashes, target_label=label)
    meta.extra.update({"selection": {"unit": selection.unit.name, "member": selection.member},
                       "target_spec": target, "constants": outline.constants, "seed": req.seed})
    if space:
        meta.extra["space"] = {**space, "mapping": meta.extra.get("space", {}).get("mapping")}
    _counters_request(meta, req.counters_budget_s)
    _time_budget(meta, req)
    _versus_onnx(meta, req.compare_onnx)
    meta.target = meta.target if run else target
    meta.trials_requested = trials
    meta.rpc, meta.guided_by = req.rpc, req.guided_by or meta.guided_by
    meta.state, meta.error, meta.pid, meta.finished = "queued", None, None, None
    meta.extra.pop("error_kind", None)
    meta.extra.pop("problem", None)
    meta.sessions.append({"started": time.time(), "trials_requested": trials, "resumed": run is not None,
                          "trials_before": len(read_records(run.path)) if run else 0, "rpc": req.rpc})
    if run is None:   # the kernels' layouts of this run's records (analysis/levers.run_levers_off)
        meta.extra[Levers.OFF_KEY] = sorted(levers_off(os.environ.get(LEVERS_OFF_ENV)))
        meta.extra[Levers.KNOWN_KEY] = list(PIPELINE)
    run = run or store.create(meta)
    if guidance:
        seeded = seed_from(guidance.pop("base_dir"), run)
        meta.extra.update({"guidance": guidance, "constraints": guidance["constraints"], "seeded_records": seeded})
        meta.trials_requested = seeded + trials  # the base run's trials count toward the budget
        meta.sessions[-1]["trials_before"] = seeded
    run.source_path.write_text(text, encoding="utf-8")
    run.save(meta)
    events_from = file_size(run.events_path)
    return TuneJob(run, spawn(run), events_from)


def session_trials(req: TuneRequest) -> int:
    """The session's trial bound: ``--trials``; with ``--minutes`` alone, a ceiling the deadline comes first
    to (``analysis/budget.TRIAL_CEILING``)."""
    if req.minutes is not None:
        why = minutes_problem(req.minutes)
        if why:
            raise AsightError(why)
        if req.trials is None:
            return TRIAL_CEILING
    if not isinstance(req.trials, int) or isinstance(req.trials, bool) or req.trials < 1:
        raise AsightError(f"--trials must be a positive number (got {req.trials})")
    return req.trials


def _time_budget(meta: RunMeta, req: TuneRequest) -> None:
    """``extra.time_budget`` for this session (``store/record.TimeBudget``); none without ``--minutes``."""
    meta.extra.pop(TimeBudget.KEY, None)
    if req.minutes is not None:
        meta.extra[TimeBudget.KEY] = {"minutes": float(req.minutes), "trials": req.trials is not None}


def _versus_onnx(meta: RunMeta, model: str | None) -> None:
    """``extra.versus_onnx`` for this session: the ONNX file the job times onnxruntime on once, at its start
    (``worker/onnx_compare.onnx_time``, in the sandboxed worker), to show the model's estimate beside."""
    meta.extra.pop("versus_onnx", None)
    if model is None:
        return
    if not os.path.isfile(model):
        raise AsightError(f"--compare-onnx {model}: no such file (the ONNX model the file was imported from)")
    meta.extra["versus_onnx"] = {"model": os.path.abspath(model)}


def _counters_request(meta: RunMeta, budget_s: float | None) -> None:
    """``extra.counters_request`` for this session (``worker/tune_job.collect_counters``); a session
    without ``--counters-budget`` (or with 0, as the editor's setting) asks for none (an earlier session's
    counters.jsonl stays); the budget is checked as ``asight counters --budget-s`` is (``counters.budget_seconds``)."""
    meta.extra.pop("counters_request", None)
    if budget_s is None or not budget_seconds(budget_s, "--counters-budget"):
        return
    meta.extra["counters_request"] = {"budget_s": float(budget_s)}


def _request_text(req: TuneRequest) -> str:
    if req.text is not None:
        return req.text
    path = Path(req.file)
    if not path.is_file():
        raise AsightError(f"no such file: {req.file}" if not path.exists() else f"{req.file} is not a file")
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as err:
        raise AsightError(f"cannot read {req.file}: {err.strerror}") from None


def _resumable(store: RunStore, file: str, function: str, hashes: dict, label: str, constants: dict,
               space: dict | None = None) -> Run | None:
    run = store.find_resumable(file, function, hashes, label, _space_key(space))
    if run is None:
        return None
    meta = refresh_run(run)
    if meta.extra.get("constants", constants) != constants:
        return None   # a module-level constant (e.g. N = 256) changed: different program
    if meta.state in LIVE_STATES:
        raise AsightError(f"run {run.id} is already tuning this function (pid {meta.pid}); cancel it first")
    require_intact(run.path)   # a damaged database: said now (exit 2), never met by TVM in the job
    return run


# --------------------------------------------------------------------------- design spaces


def user_space(text: str, outline: Outline, req: TuneRequest) -> dict:
    """The design space function ``req.space`` as run.json records it (statically; not executed here)."""
    from ..tvmscript.design_spaces import SPACE_MODES, find_spaces, function_for_space, space_by_name, space_hash
    if req.space_mode not in SPACE_MODES:
        raise AsightError(f"--space-mode must be one of {', '.join(SPACE_MODES)} (got '{req.space_mode}')")
    if req.guided_by:
        raise AsightError("--space and --guided-by cannot be combined")
    spaces = find_spaces(text, req.file, outline)
    space = space_by_name(spaces, req.space)
    if space is None:
        known = ", ".join(s.name for s in spaces) or "none"
        raise AsightError(f"no design space function '{req.space}' in {req.file} (a def taking a schedule and "
                          f"calling sch.sample_*; found: {known})")
    applies_to = req.function or function_for_space(outline, space)
    if applies_to is None:
        prims = ", ".join(f.id for f in outline.functions if f.kind == "prim_func") or "none"
        named = f" (it names blocks {', '.join(space.blocks)})" if space.blocks else ""
        raise AsightError(f"cannot tell which PrimFunc '{space.name}' schedules{named}; pick one with --func "
                          f"(PrimFuncs: {prims})")
    return {"function": space.name, "mode": req.space_mode, "hash": space_hash(text, space, outline), "line": space.line,
            "applies_to": applies_to, "sites": [_site_dict(s) for s in space.sites]}


def _site_dict(site) -> dict:
    return {"line": site.line, "method": site.method, "kind": site.kind, "target": site.target,
            "block": site.block, "loop_index": site.loop_index, "results": site.results}


def check_space_selection(selection: Selection, space: dict) -> None:
    """A design space schedules one PrimFunc."""
    prims = [f for f in selection.functions if f.kind == "prim_func"]
    if len(selection.functions) != 1 or len(prims) != 1:
        names = ", ".join(f.id for f in selection.functions)
        raise AsightError(f"design space '{space['function']}' schedules one PrimFunc; '{selection.label}' is "
                          f"{names or 'not a PrimFunc'}: pick one with --func")


def _space_key(space: dict | None) -> tuple | None:
    return None if not space else (space["function"], space["mode"], space["hash"])
