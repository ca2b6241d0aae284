"""Everything a view of a run starts from (TVM-free orchestration): records, feature rows, source.

``load_run`` resolves a run reference (id, unique prefix, directory or ``latest``), reads its
records, extracts missing feature vectors through the TVM worker when one is given (cached in the
run directory, ``store/caches.py``) and finds the run's function in its source file; the payload
builders of ``views/`` take the resulting ``views.context.RunData``.  ``build_view`` is the
one-call entry point of the language server and reports.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from ..analysis import featurelayout as fl
from ..analysis.candidates import CandidateTable, build_candidates, view_records
from ..analysis.tasks import ordered_tasks, pick_task, task_workloads
from ..analysis.traces import blocks_gone, blocks_named_otherwise
from ..engine import wire
from ..engine.targets import runs_on_device
from ..errors import AsightError, WorkerError
from ..store.caches import FEATURES_SCHEMA, read_feature_cache, write_feature_cache
from ..store.database import require_records_target
from .adopt_checks import require_adopted_records
from ..store.runs import Run, RunMeta, RunStore, read_records
from ..tvmscript.model import Function
from ..store.place import run_file
from .lookup import chosen_records
from .catalogue import Catalogue
from ..tvmscript.outline import build_outline
from ..tvmscript.pysource import decode_source, read_bounded
from ..views.registry import BUILDERS
from ..views.context import RunData


def source_params(meta: RunMeta, run_dir: Path) -> dict:
    """Source text and unit of the run's function, for the worker's fallback (empty if unreadable)."""
    path = resolve_source(run_file(meta, run_dir), run_dir)
    if path is None:
        return {}
    text = path.read_text(encoding="utf-8", errors="replace")
    outline = build_outline(text, str(path))
    fn = outline.function(meta.function)
    unit = next((u for u in outline.units if (fn and fn.id in u.functions) or u.name == meta.function), None)
    if unit is None or not unit.safe:
        return {}
    return {"text": text, "unit": {"start_line": unit.start_line, "end_line": unit.end_line},
            "constants": outline.constants, "aliases": outline.aliases, "function": meta.function}


def ensure_features(run: Run, worker=None, records: list[dict] | None = None, timeout: float | None = None,
                    on_event: Callable[[dict], None] | None = None) -> dict | None:
    """The feature cache of a run, extracting missing trials through ``worker`` (a WorkerClient).

    Without a worker, returns what is cached (or None).  A worker failure raises ``WorkerError``;
    the cache on disk is left as it was.
    """
    cache = read_feature_cache(run.path)
    records = records if records is not None else read_records(run.path)
    have = set(cache["records"]) if cache else set()
    missing = [r["trial"] for r in records if r["trial"] not in have]
    if not missing or worker is None:
        return cache
    params = {"run_dir": str(run.path), "trials": missing}
    try:
        params.update(source_params(run.load(), run.path))
    except (AsightError, OSError):
        pass
    reply = worker.request(wire.FEATURES, params, timeout=timeout or 60 + 0.05 * len(missing), on_event=on_event)
    merged = cache or {"schema": FEATURES_SCHEMA, "records": {}, "baselines": {}}
    merged["records"].update({int(k): v for k, v in reply.get("records", {}).items()})
    for key, value in reply.get("baselines", {}).items():
        if int(key) not in merged["baselines"] or merged["baselines"][int(key)].get("error"):
            merged["baselines"][int(key)] = value
    merged["feature_length"] = reply.get("feature_length", fl.LENGTH)
    merged["tvm"] = reply.get("tvm")
    write_feature_cache(run.path, merged)
    return merged


def resolve_source(file: str | None, run_dir: Path) -> Path | None:
    """The run's source file: absolute, relative to the cwd, or to the run dir and its parents."""
    if not file:
        return None
    path = Path(file)
    if path.is_absolute():
        return path if path.is_file() else None
    for base in [Path.cwd(), run_dir, *run_dir.resolve().parents]:
        if (base / path).is_file():
            return base / path
    return None


def source_text(meta: RunMeta, run_dir: Path) -> str | None:
    """The run's source file's text, or None when it cannot be read.  Read bounded and only when a
    regular file (``pysource.read_bounded``): ``file`` is run.json's, data a repository ships
    (a run.json naming "/dev/zero" must not be read without end)."""
    path = resolve_source(run_file(meta, run_dir), run_dir)
    try:
        return decode_source(read_bounded(str(path))) if path is not None else None
    except (OSError, ValueError):
        return None


def source_function(meta: RunMeta, run_dir: Path, text: str | None = None) -> Function | None:
    """The run's function in its source file (``tvmscript.model.Function``), or None."""
    text = source_text(meta, run_dir) if text is None else text
    if text is None:
        return None
    outline = build_outline(text, meta.file or "<run>")
    fn = outline.function(meta.function)
    if fn is None:
        unit = next((u for u in outline.units if u.name == meta.function), None)
        if unit and len(unit.functions) >= 1:
            fn = outline.function(unit.functions[0])
    return fn


def load_candidates(run: Run, worker=None, function: Function | None = None, extract: bool = True,
                    on_event: Callable[[dict], None] | None = None,
                    workload: int | None = None, records: list[dict] | None = None,
                    blocks: dict | None = None) -> tuple[CandidateTable, list[str]]:
    """The candidate table of a run (of one workload when given) and notes on what is missing.
    ``records``: the run's ``read_records`` when the caller already has them (read once)."""
    meta = run.load()
    records = records if records is not None else read_records(run.path)
    records, capped = view_records([r for r in records if workload is None or r["workload"] == workload])
    notes = [capped] if capped else []
    cache = read_feature_cache(run.path)
    if extract and worker is not None and records:
        try:
            cache = ensure_features(run, worker, records, on_event=on_event)
        except WorkerError as err:
            notes.append(f"feature extraction failed ({err}); using sampled decisions instead")
    if function is None:
        try:
            function = source_function(meta, run.path)
        except OSError:
            function = None
    if function is None:
        notes.append(f"source of {meta.function} not found ({meta.file}): blocks are named from the trace only")
    table = build_candidates(records, cache, meta, function, blocks)
    if records and not table.has_features:
        notes.append("no feature vectors cached for this run; the layout uses sampled decisions")
    return table, notes


def load_run(ref: str | Run, store_root: str | None = None, worker=None, extract: bool = True,
             text: str | None = None, on_event: Callable[[dict], None] | None = None,
             task: str | None = None, all_tasks: bool = False, for_function: str | None = None,
             catalogue: Catalogue | None = None, file: str | None = None) -> RunData:
    """The data of one run (see module doc).  ``text``: the source to use instead of the file.

    A run of several tasks (a Relax model, a module of PrimFuncs) is viewed one task at a time:
    ``task``, else the task of ``for_function`` (the function the editor asked for), else the one
    taking most of the tuned time (``analysis.tasks``); its candidates alone fill the table.  A
    PrimFunc task is shown as its own function (its source blocks), not the module's first.
    ``all_tasks`` (the model's stage graph) keeps every task's records when no task is named.
    Its status is the catalogue's (``catalogue``: the caller's, else the one of the run's store) for the
    function as ``text`` has it in ``file`` (the file now; None: the run's).
    """
    run = ref if isinstance(ref, Run) else RunStore(store_root).get(ref)
    meta = _load(run, ref == "latest")
    require_records_target(run, meta)
    function = source_function(meta, run.path, text) if text is not None else None
    records = read_records(run.path)
    require_adopted_records(run, meta, records)
    task = task or task_of_function(meta, for_function)
    shown, names, only = _task(run, meta, task, records)
    if all_tasks and task is None:
        shown, only = None, None
    if text is None and function is None and shown is not None:
        text = source_text(meta, run.path)
    own = _task_function(meta, shown, text) if shown is not None else None
    function = own or function
    blocks = _task_blocks(run, only, function or source_function(meta, run.path, text), text, shown) \
        if shown is not None and own is None else None
    table, notes = load_candidates(run, worker=worker, function=function, extract=extract, on_event=on_event,
                                   workload=only, records=records, blocks=blocks)
    if shown is not None and len(names) > 1:
        notes.append(f"task {shown} of {len(names)} (pick another with --task: "
                     f"{', '.join(ordered_tasks(meta.tasks or [], names, records, chosen_records(meta)))})")
    if function is None:
        try:
            function = source_function(meta, run.path)
        except OSError:
            function = None
    text = text if text is not None else source_text(meta, run.path)
    view = (catalogue or Catalogue.of_run(run.path)).view_of_run(meta, run.path, file, function, text)
    notes.extend(_named_otherwise(meta, function, records) + _stale(view))
    counters, refused = _counters(run, meta, records, notes)
    chosen = chosen_records(meta)
    return RunData(run, meta, table, function, notes, task=shown,
                   tasks=ordered_tasks(meta.tasks or [], names, records, chosen) if names else [],
                   text=text, counters=counters, counters_refused=refused,
                   on_device=runs_on_device(meta.target), view=view)


def _load(run: Run, latest: bool) -> RunMeta:
    """run.json; the newest run, unreadable, says how to view another."""
    try:
        return run.load()
    except AsightError as err:
        if not latest:
            raise
        raise AsightError(f"{err}; it is the newest run: view another with --run R (the runs are in "
                          f"{run.path.parent})") from None


def _stale(view) -> list[str]:
    """The lens's "⚠ stale" in every panel and the report, with the catalogue's reasons: the figures are of
    the source the run tuned (N 1024 -> 512 would show the 512 shapes beside the 1024 run's time)."""
    if not view.stale:
        return []
    return [f"⚠ stale: {'; '.join(view.reasons)}: the figures are the run's, of the source it tuned; "
            "tune it again for the current one"]


def _named_otherwise(meta: RunMeta, function: Function | None, records: list[dict]) -> list[str]:
    """An adopted run whose records get blocks the function names otherwise: the loop view had no best
    schedule line and said nothing; the note says why."""
    adopted = meta.adopted
    workload = adopted.workload if adopted else None
    if workload is None or function is None or function.kind != "prim_func":
        return []
    gone = blocks_gone((r["insts"] for r in records if r["workload"] == workload), (b.name for b in function.blocks))
    return [blocks_named_otherwise(meta.id, gone)] if gone else []


def _counters(run: Run, meta: RunMeta, records: list[dict], notes: list[str]) -> tuple[list | None, str | None]:
    """The run's measured counters, checked as adopt checks them (``adopt_checks.run_counters``), and
    why a file there is not used: a bad file is one note, and the views fall back to the model."""
    from .adopt_checks import checked_counters
    entries, why = checked_counters(run.path, records, meta.adopted)
    if why:
        notes.append(f"counters not used: {run.path / why}")
    return entries, why


def _task_blocks(run: Run, workload: int | None, function: Function | None, text: str | None,
                 task: str) -> dict | None:
    """A Relax task's kernel blocks with their loop variables (``analysis.workload_loops``), the
    outer loops named by the layout the task's source binding names (``n, c, h, w``); None when
    the workload cannot be read."""
    from ..analysis.traces import BlockInfo
    from ..analysis.workload_loops import block_loop_vars, layout_of, named_axes
    from ..store.caches import load_profile
    from ..store.database import workload_graph
    rows = run.workloads()
    graph = workload_graph(rows[workload]) if workload is not None and 0 <= workload < len(rows) else None
    if graph is None:
        return None
    layout = None
    if text and function is not None:
        calls = (((load_profile(run) or {}).get("relax") or {}).get("tasks") or {}).get("tuned") or {}
        first = next((c["vars"][0] for c in calls.get("tasks") or [] if c.get("task") == task and c.get("vars")), None)
        binding = next((b for b in function.bindings if b.name == first), None)
        layout = layout_of(text, binding.range["start"]["line"]) if binding else None
    return {name: BlockInfo(name, named_axes(loop_vars, layout), [], [])
            for name, loop_vars in block_loop_vars(graph).items()}


def task_of_function(meta: RunMeta, function_id: str | None) -> str | None:
    """The task of a run of several PrimFuncs that tuned ``function_id`` (``Module.mm_tall`` ->
    ``mm_tall``), None for another run or function: the editor's Loop view and Search space lenses
    name the function, and showed the module's largest task under its name."""
    tasks = [t for t in meta.tasks or [] if isinstance(t, dict)]
    if not function_id or meta.kind == "relax" or len(tasks) < 2:
        return None
    member = function_id.rsplit(".", 1)[-1]
    return next((t.get("name") for t in tasks if member in (t.get("functions") or [])), None)


def _task_function(meta: RunMeta, task: str, text: str | None) -> Function | None:
    """The PrimFunc a task of a module run tuned, in the run's source (None for a Relax task or when
    the source does not hold it): its blocks name the loop view, not the module's first function's."""
    entry = next((t for t in meta.tasks or [] if isinstance(t, dict) and t.get("name") == task), None)
    names = (entry or {}).get("functions") or []
    if meta.kind == "relax" or len(names) != 1 or text is None:
        return None
    outline = build_outline(text, meta.file or "<run>")
    fn = outline.function(f"{meta.function}.{names[0]}") or outline.function(names[0])
    return fn if fn is not None and fn.kind == "prim_func" else None


def _task(run: Run, meta: RunMeta, wanted: str | None, records: list[dict]) -> tuple[str | None, dict, int | None]:
    """(task shown or None, task -> workload index, workload to keep or None)."""
    chosen = chosen_records(meta)
    workloads = task_workloads(meta.tasks or [], run.workload_hashes(), chosen)
    try:
        shown = pick_task(meta.tasks or [], workloads, records, chosen, wanted)
    except ValueError as err:
        raise AsightError(str(err)) from None
    return shown, workloads, (workloads[shown] if shown is not None else None)


_WARM: list = []
_WARM_LOCK = threading.Lock()


def warm_imports() -> None:
    """Import the libraries the payloads need (scipy's spatial and interpolation modules,
    contourpy) in a background thread, once per process.

    A fresh process pays 1–2 s for them on this VM (scikit-learn, 4–5 s, is no longer on the
    search-space path); a process that paid such imports inside its first search-space payload
    showed "1,000 candidates: 2.1 s, 20,000: 0.6 s" — the order mattered, not the size
    (docs/analytics.md, "Speed").  Started before a search-space payload's run is loaded
    (``build_view``, ``asight space``), they overlap the reading of its records and features; a
    server can call this at start-up to take them off the first request.
    """
    with _WARM_LOCK:
        if _WARM:
            return
        thread = threading.Thread(target=_import_analysis, name="asight-warm-imports", daemon=True)
        _WARM.append(thread)
    thread.start()


def _import_analysis() -> None:
    import importlib
    for name in ("scipy.spatial", "scipy.interpolate", "contourpy"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def build_view(kind: str, run_dir: str | Path, text: str | None = None, worker=None, seed: int = 0,
               task: str | None = None, for_function: str | None = None, catalogue: Catalogue | None = None,
               file: str | None = None) -> dict:
    """The ``kind`` payload (``searchSpace`` / ``loopView`` / ``stageGraph`` / ``principles``) of a run
    (of one of its tasks: ``task``, else ``for_function``'s, else the default one); ``catalogue`` and
    ``file``: as ``load_run``'s."""
    if kind == "searchSpace":
        warm_imports()   # scipy's imports overlap the reading of the run (see warm_imports)
    data = load_run(Run(run_dir), worker=worker, extract=worker is not None, text=text, task=task,
                    all_tasks=kind == "stageGraph", for_function=for_function, catalogue=catalogue, file=file)
    if kind == "stageGraph" and task is not None and data.function is not None and data.function.kind != "prim_func":
        return task_stage_graph(data, worker)
    builder = BUILDERS[kind]
    return builder(data, seed=seed) if kind in ("searchSpace", "principles") else builder(data)


def task_stage_graph(data: RunData, worker) -> dict:
    """The block-level stage graph of one task (fused kernel) of a Relax run: the blocks of its
    tuned kernel (the scheduled code the code view shows, read as TVMScript), with the task's
    per-call cost from the run's profile."""
    from ..store.caches import load_profile
    from ..views.loops import kernel_stage_graph
    from .codeview import code_view
    if worker is None:
        raise AsightError("a kernel's stage graph needs its tuned code from the TVM worker (a trusted workspace)")
    path = resolve_source(run_file(data.meta, data.run.path), data.run.path)
    code = code_view(str(path) if path else data.meta.file, str(data.run.path), function=data.function.id,
                     worker=worker, text=data.text, task=data.task)
    if code.get("status") != "ok":
        raise AsightError(code.get("message") or f"no code for task {data.task}")
    return kernel_stage_graph(data, code, load_profile(data.run))
