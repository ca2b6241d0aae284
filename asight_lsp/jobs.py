"""Tuning jobs (TVM-free): validate a request, create or resume a run, spawn and watch the job.

``start_tune(TuneRequest(...))`` checks the request statically (syntax and the safety gate: a
file's code is never executed; unknown function -> ``AsightError`` listing the functions), creates
``<store>/runs/<id>/`` (or resumes the run of the same file, function, source hashes and target),
starts ``python -m asight_lsp.worker.tune_job RUN_DIR`` in its own process group and returns a
``TuneJob`` at once.  Interface: ``notes/jobs-api.md``; decisions: ``docs/tuning.md``.

Budget semantics: ``trials`` is the run's total.  Records already in a resumed run count toward
it, so an interrupted run continues where it stopped and re-running a finished request is a no-op
(raise ``trials`` to tune further, or pass ``resume=False`` for a fresh run).
"""
from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import AsightError
from .guidance import plan_guidance, seed_from
from .runs import Run, RunMeta, RunStore, function_hash, read_records
from .sourcemap import Outline, Unit, build_outline
from .targets import target_config
from .workerclient import worker_env

# Target kinds TVM 0.27 knows (tvm.target.Target.list_kinds()); tags such as "nvidia/..." also pass.
TARGET_KINDS = ("llvm", "c", "cuda", "nvptx", "rocm", "vulkan", "metal", "opencl", "webgpu", "hexagon",
                "ext_dev", "composite", "trn")
CANCEL_GRACE_S = 1.5
LIVE_STATES = ("queued", "running")


class InputError(AsightError):
    """The file itself has errors (syntax, refused by the safety gate): the CLI exits 1."""


@dataclass
class TuneRequest:
    file: str                      # path of the TVMScript file
    function: str | None = None    # function id/name ("Mod.main", "main") or unit name; None = the only unit
    target: str | None = None      # None = host CPU; "cuda"; "llvm -mcpu=..."; Target JSON text
    trials: int = 64
    store_root: str | None = None  # .asight dir; None = default_store_root()
    rpc: str | None = None         # "HOST:PORT:KEY" of a TVM RPC tracker
    text: str | None = None        # unsaved editor text to tune instead of the file content (LSP)
    guided_by: str | None = None   # run whose design principles steer this one (a fresh run, seeded with its records)
    principles_file: str | None = None  # JSON principles/constraints to guide by instead of the mined ones
    seed: int | None = None
    resume: bool = True            # reuse the run of the same function + source hash + target
    space: str | None = None       # a design space function of the file (docs/spaces.md): runs user code
    space_mode: str = "alone"      # alone: only that space; union: with MetaSchedule's default rules


# --------------------------------------------------------------------------- validation


@dataclass
class Selection:
    """What a request tunes: a whole unit, or one ``member`` function of an IRModule unit."""
    unit: Unit
    member: str | None             # function name inside the unit's IRModule, or None = whole unit
    label: str                     # RunMeta.function: function id, or unit name for a whole module
    functions: list               # sourcemap Functions whose text the run depends on


def select(outline: Outline, name: str | None) -> Selection:
    """Resolve ``--func`` against the outline; AsightError (with the choices) when it does not match."""
    if name is None:
        if len(outline.units) == 1:
            return _whole_unit(outline, outline.units[0])
        if not outline.units:
            raise _no_units(outline)
        names = ", ".join(u.name for u in outline.units)
        raise AsightError(f"{outline.path} has {len(outline.units)} units ({names}); pick one with --func")
    unit = next((u for u in outline.units if u.name == name), None)
    if unit is not None:
        return _whole_unit(outline, unit)
    matches = [f for f in outline.functions if f.id == name] or [f for f in outline.functions if f.name == name]
    if len(matches) > 1:
        raise AsightError(f"function '{name}' is ambiguous: {', '.join(f.id for f in matches)}; use the full id")
    if not matches:
        if outline.syntax_errors:
            raise _syntax_problem(outline, outline.syntax_errors[0])
        raise AsightError(f"no function '{name}' in {outline.path}; available: {available(outline)}")
    fn = matches[0]
    unit = next(u for u in outline.units if u.name == fn.unit)
    if fn.module is None:
        return _whole_unit(outline, unit)
    members = [f for f in outline.functions if f.unit == unit.name]
    if fn.kind == "relax_function":   # a Relax function is tuned with the PrimFuncs it may call
        return Selection(unit, fn.name, fn.id, members)
    return Selection(unit, fn.name, fn.id, [fn])


def _whole_unit(outline: Outline, unit: Unit) -> Selection:
    functions = [f for f in outline.functions if f.unit == unit.name]
    if not functions:
        raise AsightError(f"unit '{unit.name}' has no function to tune")
    label = functions[0].id if unit.kind in ("prim_func", "relax_function") else unit.name
    return Selection(unit, None, label, functions)


def available(outline: Outline) -> str:
    names = [f.id for f in outline.functions]
    names += [u.name for u in outline.units if u.kind == "ir_module"]
    return ", ".join(dict.fromkeys(names)) or "(none)"


def _no_units(outline: Outline) -> AsightError:
    if outline.syntax_errors:
        return _syntax_problem(outline, outline.syntax_errors[0])
    return AsightError(f"{outline.path} has no @T.prim_func, @R.function or @I.ir_module to tune")


def _syntax_problem(outline: Outline, diag: dict) -> InputError:
    start = diag["range"]["start"]
    return InputError(f"{outline.path}:{start['line'] + 1}:{start['character'] + 1}: {diag['message']}")


def check_selection(outline: Outline, selection: Selection) -> None:
    """Refuse a unit with syntax errors inside it or that the safety gate would not evaluate."""
    unit = selection.unit
    for diag in outline.syntax_errors:
        if unit.start_line <= diag["range"]["start"]["line"] <= unit.end_line:
            raise _syntax_problem(outline, diag)
    if unit.problems:
        first = unit.problems[0]
        start = first["range"]["start"]
        more = f" (and {len(unit.problems) - 1} more)" if len(unit.problems) > 1 else ""
        raise InputError(f"{outline.path}:{start['line'] + 1}:{start['character'] + 1}: refusing to tune "
                         f"'{unit.name}': {first['message'].split(';')[0]}{more}")


def check_target(target: str | None) -> str:
    """A stable label for the target (resume key); AsightError for a kind TVM does not know.

    The full check (attributes) happens in the job with TVM; this catches typos before a job starts.
    """
    if target is None or not target.strip() or target.strip() == "host":
        return host_label()
    text = target.strip()
    config = target_config(text)
    kind = config if isinstance(config, str) else str(config["kind"])
    if text.startswith("{"):
        label = json.dumps(config, sort_keys=True, separators=(",", ":"))
    else:
        label = " ".join(text.split())
    if kind not in TARGET_KINDS and "/" not in kind:
        raise AsightError(f"unknown target '{text}': the kind must be one of {', '.join(TARGET_KINDS)} "
                          "(or a Target JSON / tag)")
    if kind == "llvm" and "mcpu" not in label and "mtriple" not in label:
        return host_label()        # the job fills in the host's mcpu and num-cores
    return label


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


def check_rpc(rpc: str | None) -> None:
    if rpc is None:
        return
    parts = rpc.split(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2]:
        raise AsightError(f"--rpc expects HOST:PORT:KEY of a TVM RPC tracker (got '{rpc}')")


# --------------------------------------------------------------------------- processes


def pid_alive(pid: int | None) -> bool:
    """Is ``pid`` a live (not zombie) tuning job process?"""
    if not pid:
        return False
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return any("tune_job" in part for part in proc.cmdline())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def refresh_run(run: Run, state: str = "failed", reason: str | None = None, known_dead: bool = False) -> RunMeta:
    """The run's metadata, first marking a run whose job is gone (SIGKILL, segfault) as ``state``.

    Called by the watcher when the job exits and by any later reader; the records measured so
    far stay as they are (``runs.read_records`` tolerates a torn last line).
    """
    meta = run.load()
    if meta.state not in LIVE_STATES:
        return meta
    if not known_dead:
        if pid_alive(meta.pid):
            return meta
        queued_at = meta.sessions[-1].get("started", meta.created) if meta.sessions else meta.created
        if meta.state == "queued" and meta.pid is None and time.time() - queued_at < 30:
            return meta  # spawned a moment ago; the job has not written its pid yet
    records = read_records(run.path)
    meta.state = state
    meta.error = reason or (None if state == "cancelled" else
                            f"the tuning job (pid {meta.pid}) ended without finishing (killed or crashed)")
    meta.finished = time.time()
    meta.trials_done = len(records)
    if meta.kind == "tir" and len(meta.tasks) <= 1:
        valid = [r["latency_us"] for r in records if r["latency_us"] is not None]
        meta.best_us = min(valid) if valid else meta.best_us
    if meta.sessions:
        meta.sessions[-1].update({"finished": meta.finished, "state": state, "trials_done": meta.trials_done})
    run.save(meta)
    run.append_event({"type": "finished", "state": state, "best_us": meta.best_us, "baseline_us": meta.baseline_us,
                      "trials_done": meta.trials_done, "error": meta.error, "time": meta.finished})
    return meta


def kill_group(pgid: int | None, sig: int = signal.SIGKILL) -> None:
    """Signal a job's process group (its builder/runner workers too); a gone group is fine."""
    if not pgid:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return []
    import psutil
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return members


def end_group(pgid: int | None, timeout: float = 2.0) -> None:
    """SIGKILL what is left of a job's group and wait (briefly) until it is really gone."""
    if not pgid:
        return
    deadline = time.monotonic() + timeout
    kill_group(pgid)
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
        kill_group(pgid)


class TuneJob:
    """Handle on a running (or finished) tuning job."""

    def __init__(self, run: Run, proc: subprocess.Popen | None = None, events_from: int | None = None):
        self.run = run
        self._proc = proc
        self._offset = _size(run.events_path) if events_from is None else events_from
        self._partial = b""
        self._ended = threading.Event()
        self._reaped = threading.Lock()
        self._cancelling = False
        pid = proc.pid if proc else run.load().pid
        self.pid = pid
        threading.Thread(target=self._watch, daemon=True, name=f"tune-watch-{run.id}").start()

    @classmethod
    def attach(cls, run: Run, events_from: int = 0) -> "TuneJob":
        """A handle on a job started elsewhere (e.g. before the language server restarted)."""
        return cls(run, None, events_from)

    # -- watching
    def _watch(self) -> None:
        if self._proc is not None:
            self._proc.wait()
        else:   # attached: poll until the run is no longer live (refresh_run judges a missing pid)
            while True:
                meta = refresh_run(self.run, "cancelled" if self._cancelling else "failed")
                self.pid = meta.pid or self.pid
                if meta.state not in LIVE_STATES:
                    break
                time.sleep(0.2)
        self._reap()

    def _reap(self) -> None:
        """After the job process ended: kill stray workers, fix the state if the job could not."""
        with self._reaped:
            if self._ended.is_set():
                return
            if self.pid:
                end_group(self.pid)
            code = self._proc.returncode if self._proc is not None else None
            if self._cancelling:
                refresh_run(self.run, "cancelled", known_dead=True)
            else:
                how = (f"killed by signal {-code}" if code is not None and code < 0 else
                       f"exit code {code}" if code is not None else "process gone")
                refresh_run(self.run, "failed", f"the tuning job ended without finishing ({how})", known_dead=True)
            self._ended.set()

    @property
    def done(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout: float | None = None) -> RunMeta:
        """Block until the job ended (or ``timeout`` s passed: then the current, live metadata)."""
        self._ended.wait(timeout)
        return self.run.load()

    def cancel(self) -> None:
        """Stop the job: SIGTERM (the job records ``cancelled`` and kills its group), SIGKILL after ~1.5 s."""
        if self.done:
            return
        self._cancelling = True
        self.pid = self.pid or self.run.load().pid
        if not self.pid:    # queued, not started: nothing to signal; record the cancel
            refresh_run(self.run, "cancelled", known_dead=True)
            self._ended.wait(2)
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if not self._ended.wait(CANCEL_GRACE_S):
            kill_group(self.pid)
            if self._proc is None:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._ended.wait(5)

    # -- events
    def poll_events(self) -> list[dict]:
        """New events since the last call (complete lines of events.jsonl only); never blocks."""
        try:
            with self.run.events_path.open("rb") as stream:
                stream.seek(self._offset)
                chunk = stream.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        events = []
        for line in lines:
            if line.strip():
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return events


def failure_message(run: Run, meta: RunMeta) -> str | None:
    """The run's error, with a TVM parse problem placed where the user must fix it.

    TVM reports well-formedness errors at 1:1; ``diagnostics.problem_to_diagnostic`` finds the
    statement (the same placement ``asight check`` and the editor use).
    """
    problem = meta.extra.get("problem")
    if not problem or not run.source_path.exists():
        return meta.error
    from .diagnostics import problem_to_diagnostic
    text = run.source_path.read_text(encoding="utf-8")
    outline = build_outline(text, meta.file)
    unit = next((u for u in outline.units if u.name == problem.get("unit")), None)
    diag = problem_to_diagnostic(problem, unit, text.splitlines())
    start = diag["range"]["start"]
    return f"{meta.file}:{start['line'] + 1}:{start['character'] + 1}: {diag['message']}"


# --------------------------------------------------------------------------- start


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
    label = check_target(req.target)
    check_rpc(req.rpc)
    if not isinstance(req.trials, int) or req.trials < 1:
        raise AsightError(f"--trials must be a positive number (got {req.trials})")
    hashes = {fn.id: function_hash(text, fn) for fn in selection.functions}
    store = RunStore(req.store_root)
    file = os.path.abspath(req.file)
    guidance = plan_guidance(store, req.guided_by, selection.label, req.principles_file,
                             aliases=tuple(f.id for f in selection.functions)) if req.guided_by else None
    resumable = req.resume and guidance is None  # a guided run never continues its base run
    run = _resumable(store, file, selection.label, hashes, label, outline.constants, space) if resumable else None
    meta = run.load() if run else RunMeta(id=store.new_run_id(selection.label), file=file,
                                          function=selection.label, source_hashes=hashes, target_label=label)
    meta.extra.update({"selection": {"unit": selection.unit.name, "member": selection.member},
                       "target_spec": req.target, "constants": outline.constants, "seed": req.seed})
    if space:
        meta.extra["space"] = {**space, "mapping": meta.extra.get("space", {}).get("mapping")}
    meta.target = meta.target if run else req.target
    meta.trials_requested = req.trials
    meta.rpc, meta.guided_by = req.rpc, req.guided_by or meta.guided_by
    meta.state, meta.error, meta.pid, meta.finished = "queued", None, None, None
    meta.extra.pop("error_kind", None)
    meta.extra.pop("problem", None)
    meta.sessions.append({"started": time.time(), "trials_requested": req.trials, "resumed": run is not None,
                          "trials_before": len(read_records(run.path)) if run else 0, "rpc": req.rpc})
    run = run or store.create(meta)
    if guidance:
        seeded = seed_from(guidance.pop("base_dir"), run)
        meta.extra.update({"guidance": guidance, "constraints": guidance["constraints"], "seeded_records": seeded})
        meta.trials_requested = seeded + req.trials  # the base run's trials count toward the budget
        meta.sessions[-1]["trials_before"] = seeded
    run.source_path.write_text(text, encoding="utf-8")
    run.save(meta)
    events_from = _size(run.events_path)
    return TuneJob(run, spawn(run), events_from)


def spawn(run: Run) -> subprocess.Popen:
    """Start the job process (own session = own process group); the job records its pid itself."""
    log = (run.path / "job.log").open("ab")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "asight_lsp.worker.tune_job", str(run.path.resolve())],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=worker_env(), start_new_session=True, cwd=str(run.path))
    finally:
        log.close()
    return proc


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


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
    return run


# --------------------------------------------------------------------------- design spaces


def user_space(text: str, outline: Outline, req: TuneRequest) -> dict:
    """The design space function ``req.space`` as run.json records it (statically; not executed here)."""
    from .spaces import SPACE_MODES, find_spaces, function_for_space, space_by_name, space_hash
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
