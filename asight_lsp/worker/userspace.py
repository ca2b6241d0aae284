"""Design spaces written by the user: load, probe and wrap a schedule function (TVM side).

The user's code runs only in a sandboxed worker (``space_traces``, asked by the tuning job for a run
started with ``--space``; the language server refuses it in an untrusted workspace), never in the job:

* ``load_space_function`` executes the file's *module context* — its imports, assignments and
  plain ``def``/``class`` statements, with their original line numbers — and returns the function.
  TVMScript units and any other top-level statement (calls, ``if __name__ == ...``) are not run.
* ``probe`` runs it once through ``ms.space_generator.ScheduleFn`` to generate the design space,
  with ``tvm.s_tir.Schedule.sample_*`` wrapped so each sampling instruction gets the user's line.
* the worker returns the design spaces' traces; ``space_generator`` (in the job) is what MetaSchedule
  tunes with: those traces replayed on the task (``ScheduleFn``), alone or in a ``SpaceGeneratorUnion``
  with the default ``PostOrderApply`` rules.  MetaSchedule calls a space generator once per task and
  then samples new decisions by replaying the traces, so the function itself is not needed there.

Every failure becomes ``SpaceError`` with the user's line and the exception in one line.
"""
from __future__ import annotations

import ast
import contextlib
import os
import sys
import traceback

from ..engine import wire
from ..tvmscript.design_spaces import SAMPLING_METHODS, module_context
from .compat import Trace, load_ir, ms, s_tir, tvm


class SpaceError(Exception):
    """The design space function failed (one line: where and why)."""


def one_line(err: BaseException) -> str:
    """``Type: message`` in one line; a TVM ScheduleError's own ``Error message:`` line if it has one."""
    text = str(err).strip()
    for line in text.splitlines():
        if line.startswith("Error message:"):
            return f"{type(err).__name__}: {line.split(':', 1)[1].strip()}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def user_line(tb, path: str) -> int | None:
    """1-based line of the innermost frame of ``tb`` in the user's file."""
    line = None
    for frame in traceback.extract_tb(tb):
        if frame.filename == path:
            line = frame.lineno
    return line


# --------------------------------------------------------------------------- load


def load_space_function(text: str, path: str, name: str, unit_lines: set):
    """Execute the file's module context (user code!) and return the function ``name``."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as err:
        raise SpaceError(f"{path}:{err.lineno}: SyntaxError: {err.msg}") from None
    namespace = {"__name__": "asight_user_space", "__file__": path}
    try:
        exec(compile(module_context(tree, unit_lines), path, "exec"), namespace)  # noqa: S102  (explicit command)
    except Exception as err:  # noqa: BLE001
        line = user_line(err.__traceback__, path)
        raise SpaceError(f"{path}:{line}: loading the file's imports and definitions failed: {one_line(err)}") from None
    fn = namespace.get(name)
    if not callable(fn):
        raise SpaceError(f"{path}: no function '{name}' to use as a design space")
    return fn


# --------------------------------------------------------------------------- wrap and record


def guarded(fn, path: str, name: str):
    """``fn`` with its failures turned into SpaceError (line + exception) and its result checked."""
    def schedule_fn(sch):
        try:
            result = fn(sch)
        except SpaceError:
            raise
        except Exception as err:  # noqa: BLE001
            line = user_line(err.__traceback__, path)
            where = f"{path}:{line}" if line else path
            raise SpaceError(f"design space '{name}' raised at {where}: {one_line(err)}") from None
        if result is None or isinstance(result, s_tir.Schedule):
            return result
        if isinstance(result, (list, tuple)) and result and all(isinstance(s, s_tir.Schedule) for s in result):
            return list(result)
        raise SpaceError(f"design space '{name}' must return None, the schedule or a list of schedules "
                         f"(it returned {type(result).__name__})")
    return schedule_fn


@contextlib.contextmanager
def recording(path: str, calls: list):
    """Wrap ``Schedule.sample_*``: each call appends {method, line (1-based), inst} to ``calls``."""
    originals = {name: getattr(s_tir.Schedule, name) for name in SAMPLING_METHODS if hasattr(s_tir.Schedule, name)}

    def wrap(name, original):
        def sample(self, *args, **kwargs):
            before = len(self.trace.insts) if self.trace is not None else None
            out = original(self, *args, **kwargs)
            calls.append({"method": name, "line": _caller_line(path), "inst": before})
            return out
        return sample

    for name, original in originals.items():
        setattr(s_tir.Schedule, name, wrap(name, original))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(s_tir.Schedule, name, original)


def _space_message(err: BaseException) -> str:
    text = str(err)
    for line in text.splitlines():
        if "design space '" in line:
            return line[line.index("design space '"):].strip()
    return f"generating the design space failed: {one_line(err)}"


def _caller_line(path: str) -> int | None:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == path:
            return frame.f_lineno
        frame = frame.f_back
    return None


# --------------------------------------------------------------------------- probe and tune


def space_generator(traces: list, mode: str):
    """What MetaSchedule tunes with: the design spaces' ``traces`` (TVM's JSON of each trace's
    ``as_json()``, from ``space_traces``) replayed on the task, alone or with the default rules
    (``mode`` "union")."""
    loaded = [load_ir(trace) for trace in traces]

    def replay(sch):
        spaces = []
        for trace in loaded:
            space = s_tir.Schedule(sch.mod, seed=sch.fork_seed())
            Trace.apply_json_to_schedule(trace, space)
            spaces.append(space)
        return spaces
    own = ms.space_generator.ScheduleFn(replay)
    if mode == "union":
        return ms.space_generator.SpaceGeneratorUnion([own, ms.space_generator.PostOrderApply()])
    return own


def require_buildable(traces: list, mod, target, name: str) -> None:
    """Each design space (a trace from the sandboxed worker) replayed on ``mod`` passes the native-call
    rule: a space can paste source in through an annotation (``parse.NativeCallRefused``)."""
    from .parse import require_no_native_calls
    for trace in traces:
        space = s_tir.Schedule(mod)
        Trace.apply_json_to_schedule(load_ir(trace), space)
        require_no_native_calls(space.mod, target, f"design space '{name}'")


def space_traces(params: dict, emit=None, off=None) -> dict:
    """In a sandboxed worker: load the file's space function, generate its design space on the task
    (``mod``, TVM's JSON) and return the line mapping and the spaces' traces, or ``{error}``."""
    from .compat import save_ir
    from .sandbox import STATUS
    if not STATUS.active:
        raise RuntimeError("a design space function runs only in a sandboxed worker")
    path, name = params["file"], params["function"]
    try:
        fn = guarded(load_space_function(params["text"], path, name, set(params["units"])), path, name)
        mapping, spaces = probe(load_ir(params["mod"]), tvm.target.Target(params["target"]), fn, path)
    except SpaceError as err:
        return {"error": str(err)}
    return {"mapping": mapping, "traces": [save_ir(space.trace.as_json()) for space in spaces]}


def probe(mod, target, fn, path: str) -> tuple[dict, list]:
    """Generate the design space once; map each sampling instruction to the user's source line.

    Returns the design spaces and ``{"design_spaces": n, "kinds": [...], "instructions": [{index, ordinal, kind, line, method}]}``:
    kinds = the design space trace's instruction kinds (how records of this space are told apart), index =
    position in the design space's trace, ordinal = position among its sampling instructions
    (records of this space keep that order), line = 0-based source line of the call.
    """
    from .intrinsics import prepare
    prepare(target)   # the target's default rules are built with the context
    calls: list = []
    context = ms.TuneContext(mod=mod, target=target, space_generator=ms.space_generator.ScheduleFn(fn),
                             task_name="probe")
    with recording(path, calls):
        try:
            spaces = context.generate_design_space()
        except Exception as err:  # noqa: BLE001  SpaceError comes back through TVM's FFI as RuntimeError
            raise SpaceError(_space_message(err)) from None
    if not spaces:
        raise SpaceError("the design space function produced no schedule")
    insts = list(spaces[0].trace.insts)
    sampling = [i for i, inst in enumerate(insts) if inst.kind.name.startswith("Sample")]
    lines = {c["inst"]: c for c in calls if c["inst"] is not None}
    mapped = []
    for ordinal, index in enumerate(sampling):
        call = lines.get(index, {})
        line = call.get("line")
        mapped.append({"index": index, "ordinal": ordinal, "kind": insts[index].kind.name,
                       "line": None if line is None else line - 1, "method": call.get("method")})
    return {"design_spaces": len(spaces), "kinds": [inst.kind.name for inst in insts], "instructions": mapped}, \
        list(spaces)


SPACE_PROBE_TIMEOUT_S = float(os.environ.get("ASIGHT_SPACE_TIMEOUT_S", "60"))


def job_space(run, meta, plan, target, update):
    """The tuning job's SpaceGenerator for the user's design space (docs/spaces.md), generated by a
    sandboxed worker: the file's code runs there, never in this process (``space_traces``); tuning
    replays its traces.

    Records the sampling instructions' source lines in run.json (``extra.space.mapping``) and
    returns the SpaceGenerator to tune with.  A function that does not return within
    ``SPACE_PROBE_TIMEOUT_S`` fails the run."""
    from ..engine.wire import SPACE_TRACES
    from ..errors import WorkerError, WorkerTimeout
    from ..tvmscript.outline import build_outline
    from ..store.record import Space, read_section
    from .compat import save_ir
    from .tune_plan import InputProblem
    from .metaschedule import target_json
    from .parse import sandboxed_worker
    space, why = read_section(meta.extra, Space)
    if space is None:
        raise InputProblem(f"run.json's {why}: run `asight tune --space` again")
    space = meta.extra["space"]       # the dict written back with its mapping
    if plan.kind != "tir" or len(plan.tasks) != 1:
        raise InputProblem(f"design space '{space['function']}' schedules one PrimFunc, not {plan.kind} "
                           f"with {len(plan.tasks)} tasks")
    text = run.source_path.read_text(encoding="utf-8")
    units = sorted({u.start_line for u in build_outline(text, meta.file).units})
    try:
        reply = sandboxed_worker().request(SPACE_TRACES, {
            "mod": save_ir(plan.tasks[0].mod), "target": target_json(target), "text": text, "file": meta.file,
            "function": space["function"], "units": units}, timeout=SPACE_PROBE_TIMEOUT_S)
    except WorkerTimeout:
        raise InputProblem(f"design space '{space['function']}' did not return within "
                           f"{SPACE_PROBE_TIMEOUT_S} s") from None
    except WorkerError as err:
        raise InputProblem(f"design space '{space['function']}': {err}") from None
    if "error" in reply:
        raise InputProblem(reply["error"])
    try:     # what the space schedules is built and run: the native-call rule, before any trial
        require_buildable(reply["traces"], plan.tasks[0].mod, target, space["function"])
    except ValueError as err:
        raise InputProblem(str(err)) from None
    update(extra={**run.load().extra, "space": {**space, "mapping": reply["mapping"]}})
    return space_generator(reply["traces"], space["mode"])


HANDLERS = {wire.SPACE_TRACES: space_traces}
