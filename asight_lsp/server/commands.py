"""workspace/executeCommand: tune, profile, cancel, panels, apply the best schedule, compare runs.

Commands take ONE argument object (``protocol`` lists the fields).  A tuning job runs in its own
process (``jobs.start_tune``); a monitor task reads its events, reports work-done progress
(trials, best latency; the client's cancel stops the job) and sends ``asight/runUpdated``.
"""
from __future__ import annotations

import asyncio
import time
import uuid

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from .. import protocol as P
from ..errors import AsightError
from ..store.runs import Run
from ..services.compare import compare_payload
from . import custom
from .options import target_text
from .actions import ScheduleUnavailable, compute_schedule_edit
from ..views.text import budget_text, event_budget_text, format_latency, measurement_text
from ..views.runs import run_summary
from .budget import TooLarge
from .state import MonitoredJob, ServerState, Status


class RequestFailed(JsonRpcException):
    CODE = P.ERROR_REQUEST_FAILED


def command_args(args: tuple) -> dict:
    """The single argument object of a command (an empty call means ``{}``)."""
    if not args:
        return {}
    if len(args) != 1 or not isinstance(args[0], dict):
        raise JsonRpcInvalidParams("ASight commands take one argument: an object such as "
                                   '{"uri": "file:///...", "function": "main"}')
    return args[0]


def require_trust(ls, what: str, why: str = "it would run the file's TVMScript through TVM") -> None:
    """Refuse unless the client said the workspace is trusted (the server never assumes it: a client that
    does not say, and every client of `asight serve --untrusted`, gets this)."""
    if not ls.state.options.trusted:
        raise RequestFailed(f"ASight: {what} is disabled because this workspace is not trusted ({why}). Trust the "
                            "workspace to enable it (VS Code sends its workspace trust; another editor sends "
                            "initializationOptions.trusted = true or starts `asight serve --trusted`); the outline, "
                            "hovers and static diagnostics keep working.")


def _int(value, name: str, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
        raise JsonRpcInvalidParams(f"'{name}' must be a positive number")
    return int(value)


def _minutes(value, default: float | None) -> float | None:
    """``minutes`` of asight.tune (0: none), else the ``tuneMinutes`` setting."""
    if value is None:
        return default
    from ..analysis.budget import minutes_problem
    if value == 0:
        return None
    if minutes_problem(value):
        raise JsonRpcInvalidParams(f"'minutes': {minutes_problem(value).removeprefix('--minutes ')}")
    return float(value)


def _counters_budget(value, default: float | None) -> float | None:
    """``countersBudget`` of asight.tune (seconds; 0 = none), else the server option."""
    if value is None:
        return default
    from ..services.counters import budget_seconds  # the check asight counters and asight tune make
    try:
        return budget_seconds(value, "'countersBudget'") or None
    except AsightError as err:
        raise JsonRpcInvalidParams(f"{err} (0: no counters)") from None


# --------------------------------------------------------------------------- tune


async def tune(ls, *args):
    a = command_args(args)
    if a.get("space"):
        require_trust(ls, "tuning with a design space", "it would run the file's schedule function")
    require_trust(ls, "tuning")
    doc = ls.doc(_required(a, "uri"))
    state: ServerState = ls.state
    from ..services.tuning import TuneRequest, start_tune  # TVM-free; imported on first use to keep start-up fast
    target = target_text(a.get("target"), None)
    if a.get("target") is not None and target is None:
        raise JsonRpcInvalidParams("'target' must be a target text or a Target JSON object")
    minutes = _minutes(a.get("minutes"), state.options.tune_minutes)
    trials = _int(a.get("trials"), "trials", None if minutes else state.options.trials)
    req = TuneRequest(file=doc.path, function=a.get("function"), target=target or state.options.target,
                      trials=trials, minutes=minutes, store_root=state.store_root,
                      rpc=a.get("rpc"), text=doc.text, guided_by=a.get("guidedBy"), seed=a.get("seed"),
                      resume=bool(a.get("resume", True)), space=a.get("space"),
                      space_mode=a.get("spaceMode") or "alone",
                      counters_budget_s=_counters_budget(a.get("countersBudget"), state.options.counters_budget_s))
    try:
        handle = await asyncio.to_thread(start_tune, req)
    except AsightError as err:
        raise RequestFailed(f"ASight: cannot tune: {err}") from None
    meta = handle.run.load()
    job = MonitoredJob(meta.id, doc.uri, meta.function, handle)
    state.jobs[meta.id] = job
    if state.status != Status.ERRORED:
        state.status = Status.TUNING
    state.index.invalidate()
    job.task = asyncio.ensure_future(monitor(ls, job))
    notify_run(ls, job.uri, "started", meta)
    if a.get("wait"):
        return await asyncio.shield(job.task)
    return {"schema": P.SCHEMA_COMMAND_RESULT, "command": P.CMD_TUNE, "status": "started",
            "message": f"tuning {meta.function} ({budget_text(0, meta.trials_requested, meta.extra)}) in run {meta.id}",
            "run": run_summary(meta)}


def _required(a: dict, key: str):
    value = a.get(key)
    if not isinstance(value, str) or not value:
        raise JsonRpcInvalidParams(f"missing '{key}' in the command argument")
    return value


def notify_run(ls, uri: str | None, event: str, meta) -> None:
    ls.protocol.notify(P.NOTIFY_RUN_UPDATED, {"schema": P.SCHEMA_RUN_UPDATED, "uri": uri, "event": event,
                                              "run": run_summary(meta)})


def progress_message(event: dict) -> str:
    best = event.get("best_us")
    return event_budget_text(event) + (f" · best {format_latency(best)}" if best else "")


async def begin_progress(ls, title: str, cancellable: bool = True) -> str | None:
    """A server-initiated work-done progress, if the client supports it."""
    window = ls.client_capabilities.window
    if not (window and window.work_done_progress):
        return None
    token = f"asight-{uuid.uuid4().hex[:12]}"
    try:
        await asyncio.wait_for(ls.work_done_progress.create_async(token), 5)
    except Exception:  # a client that refuses progress still gets runUpdated notifications
        return None
    ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=cancellable,
                                                                   percentage=0, message="starting"))
    return token


def _cancel_requested(ls, token: str | None) -> bool:
    future = ls.work_done_progress.tokens.get(token) if token else None
    return bool(future is not None and future.cancelled())


async def monitor(ls, job: MonitoredJob) -> dict:
    """Follow a job until it ends: progress, cancel, runUpdated, refreshed lenses and hints."""
    state: ServerState = ls.state
    job.token = await begin_progress(ls, f"ASight: tuning {job.function}")
    cancelling = False
    last_refresh = 0.0
    try:
        while True:
            done = job.handle.done
            for event in job.handle.poll_events():
                job.last_event = event
                if event.get("type") == "progress" and job.token:
                    trials = event.get("trials") or 0
                    pct = int(100 * event.get("trials_done", 0) / trials) if trials else None
                    ls.work_done_progress.report(job.token, types.WorkDoneProgressReport(
                        message=progress_message(event), percentage=pct, cancellable=True))
                if event.get("type") in ("progress", "started"):
                    state.index.invalidate()
                    meta = job.handle.run.load()
                    notify_run(ls, job.uri, "progress" if event["type"] == "progress" else "started", meta)
                    if time.monotonic() - last_refresh > 1.0:
                        last_refresh = time.monotonic()
                        refresh_views(ls)
            if done:
                break
            if not cancelling and _cancel_requested(ls, job.token):
                cancelling = True
                asyncio.ensure_future(asyncio.to_thread(job.handle.cancel))
            await asyncio.sleep(state.options.poll_interval_s)
    finally:
        meta = await asyncio.to_thread(job.handle.wait, 10)
        if job.token:
            ls.work_done_progress.end(job.token, types.WorkDoneProgressEnd(
                message=f"{meta.state}: {meta.trials_done} trials · {run_summary(meta)['headline']}"))
        state.jobs.pop(job.run_id, None)
        if state.status != Status.ERRORED:
            state.status = Status.TUNING if state.jobs else Status.RUNNING
        state.index.invalidate()
        notify_run(ls, job.uri, "finished", meta)
        refresh_views(ls)
        if meta.state == "done" and meta.kind == "relax" and state.options.trusted:
            asyncio.ensure_future(profile_model(ls, job.handle.run, job.uri))
    status = "ok" if meta.state == "done" else meta.state
    return {"schema": P.SCHEMA_COMMAND_RESULT, "command": P.CMD_TUNE, "status": status,
            "message": meta.error or f"{meta.trials_done} trials · {run_summary(meta)['headline']}",
            "run": run_summary(meta)}


async def profile_model(ls, run: Run, uri: str | None = None) -> None:
    """After a model is tuned, time each kernel call at once, then build its hotspots' graphs (both kept in
    the run, as ``services/hotspots.prepare_model`` does for the CLI) so the bindings get their hints and
    hovers without a Profile click and its panels open at once, and tell the client (``profiled``: a Model panel
    of the run redraws); a failure is logged, the run is untouched."""
    from ..services.hotspots import keep_graphs
    from ..services.profiling import profile_run
    try:
        profile = await asyncio.to_thread(profile_run, run, ls.state.worker)
    except Exception as err:  # noqa: BLE001 - a background extra: the tune result stands
        ls.window_log_message(types.LogMessageParams(types.MessageType.Warning,
                                                     f"ASight: per-call profile of {run.id} failed: {err}"))
        return
    ls.state.index.invalidate()
    notify_run(ls, uri, "profiled", run.load())
    refresh_views(ls)
    try:
        await asyncio.to_thread(keep_graphs, run, ls.state.worker, profile)
    except Exception as err:  # noqa: BLE001 - the hotspots panel builds them when opened
        ls.window_log_message(types.LogMessageParams(types.MessageType.Warning,
                                                     f"ASight: hotspots of {run.id} not prepared: {err}"))


def notify_profiled(ls, uri: str, profile: dict) -> None:
    """A profile of a run was kept (shown, or kept aside): tell the client with the run's summary, whose
    ``measurement`` says which one is shown, so open panels of the run redraw from it (issue 23)."""
    run_id = (profile.get("run") or {}).get("id")
    meta = ls.state.index.get(run_id) if run_id else None
    if meta is not None:
        notify_run(ls, uri, "profiled", meta)


def refresh_views(ls) -> None:
    """Ask the client to re-request lenses and inlay hints (when it supports refresh)."""
    ws = ls.client_capabilities.workspace
    if ws and ws.code_lens and ws.code_lens.refresh_support:
        ls.workspace_code_lens_refresh(None)
    if ws and ws.inlay_hint and ws.inlay_hint.refresh_support:
        ls.workspace_inlay_hint_refresh(None)


async def cancel(ls, *args):
    a = command_args(args)
    state: ServerState = ls.state
    run_id = a.get("run")
    if run_id is not None and not isinstance(run_id, str):
        raise JsonRpcInvalidParams("'run' must be a run id")
    jobs = [state.jobs[run_id]] if run_id in state.jobs else [] if run_id else list(state.jobs.values())
    handles = [job.handle for job in jobs]
    if run_id and not jobs:
        await state.fresh_store()
        handles = _attach(state, run_id)
    await asyncio.gather(*(asyncio.to_thread(h.cancel) for h in handles))
    return {"schema": P.SCHEMA_COMMAND_RESULT, "command": P.CMD_CANCEL, "status": "ok",
            "message": f"cancelled {len(handles)} job(s)", "run": None,
            "data": {"runs": [h.run.id for h in handles]}}


def _attach(state: ServerState, run_id: str) -> list:
    """A live run started elsewhere (CLI, a previous server): attach to its job to cancel it."""
    meta = state.index.get(run_id)
    if meta is None:
        raise JsonRpcInvalidParams(f"no run '{run_id}'")
    if meta.state not in ("queued", "running"):
        return []
    from ..services.jobs import TuneJob
    return [TuneJob.attach(Run(state.index.run_dir(run_id)))]


# --------------------------------------------------------------------------- profile


async def profile(ls, *args):
    a = command_args(args)
    require_trust(ls, "profiling")
    doc = ls.doc(_required(a, "uri"))
    state: ServerState = ls.state
    from ..services import profiling as profiles  # TVM-free; imported on first use
    token = await begin_progress(ls, f"ASight: profiling {a.get('function') or doc.path}", cancellable=False)
    try:
        # remeasure: a new dated measurement (kept beside the shown one; shown unless it is noisier,
        # or the user asks with replace) instead of the run's current profile
        remeasure = a.get("remeasure") is True
        options = profiles.ProfileOptions(remeasure=remeasure, replace=a.get("replace") is True,
                                          by="the editor's Re-measure" if remeasure else "the editor's Profile")
        data = await asyncio.to_thread(profiles.profile_file, doc.path, a.get("function"), a.get("run"),
                                       state.store_root, state.worker, options, doc.text)
    except AsightError as err:
        raise RequestFailed(f"ASight: cannot profile: {err}") from None
    finally:
        if token:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
    state.index.invalidate()
    refresh_views(ls)
    try:
        await state.fresh_store()
        notify_profiled(ls, doc.uri, data)
    except TooLarge:              # the profile is kept; only its notification waits for the store
        pass
    message = measurement_text(data.get("measurement"))
    if data.get("adopted") is False:
        message += f" — a new measurement, kept beside the shown one but not shown: {data.get('not_adopted')}"
    elif a.get("remeasure") is True:
        message += " — a new measurement; the views show it now"
    return {"schema": P.SCHEMA_COMMAND_RESULT, "command": P.CMD_PROFILE, "status": "ok", "message": message,
            "run": None, "data": data}


# --------------------------------------------------------------------------- panels, apply, compare


async def show_search_space(ls, *args):
    return await custom.dispatch(ls, P.REQ_SEARCH_SPACE, command_args(args))


async def show_loop_view(ls, *args):
    return await custom.dispatch(ls, P.REQ_LOOP_VIEW, command_args(args))


async def show_model(ls, *args):
    return await custom.dispatch(ls, P.REQ_MODEL, command_args(args))


async def show_code(ls, *args):
    return await custom.dispatch(ls, P.REQ_CODE, command_args(args))


async def apply_best_schedule(ls, *args):
    a = command_args(args)
    try:
        edit, meta, entry = await compute_schedule_edit(ls, a)
    except ScheduleUnavailable as err:
        raise RequestFailed(f"ASight: {err}") from None
    applied = None
    ws = ls.client_capabilities.workspace
    if a.get("apply", True) and ws and ws.apply_edit:
        try:
            response = await asyncio.wait_for(ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
                edit=edit, label=f"ASight: best schedule of {a.get('function')}")), 30)
            applied = bool(getattr(response, "applied", False))
        except Exception:  # the client refused or did not answer: the edit is in the result
            applied = False
    return {"schema": P.SCHEMA_APPLY_SCHEDULE, "status": "ok", "mode": a.get("mode", "trace"), "run": meta.id,
            "applied": applied, "latencyUs": entry.get("latency_us"), "edit": ls.protocol._converter.unstructure(edit)}


async def compare_runs(ls, *args):
    a = command_args(args)
    ids = a.get("runs")
    if not isinstance(ids, list) or len(ids) != 2 or not all(isinstance(i, str) for i in ids):
        raise JsonRpcInvalidParams("'runs' must list two run ids")
    await ls.state.fresh_store()
    try:
        return await asyncio.to_thread(compare_payload, ls.state.index, ids)
    except AsightError as err:
        raise JsonRpcInvalidParams(str(err)) from None


# --------------------------------------------------------------------------- export


async def export_model(ls, *args):
    """Build the file's tuned model into a library (``services/export.py``) off the event loop, with
    work-done progress; the reply (library, applied records, output check, load snippet) is ``data``."""
    a = command_args(args)
    require_trust(ls, "exporting a model", "it builds the file's model with TVM")
    doc = ls.doc(_required(a, "uri"))
    for key in ("run", "function", "output"):
        if a.get(key) is not None and not isinstance(a[key], str):
            raise JsonRpcInvalidParams(f"'{key}' must be a string")
    build = a.get("build")                             # as `asight export --tuned / --untuned`
    if build not in (None, "tuned", "untuned"):
        raise JsonRpcInvalidParams("'build' must be 'tuned' or 'untuned'")
    tune_missing = a.get("tuneMissing") or 0          # as `asight export --tune-missing N / --allow-untuned`
    if not isinstance(tune_missing, int) or isinstance(tune_missing, bool) or tune_missing < 0:
        raise JsonRpcInvalidParams("'tuneMissing' must be a number of trials >= 0")
    from ..services import export  # TVM-free; imported on first use
    out = a.get("output") or export.default_output(doc.path)
    token = await begin_progress(ls, f"ASight: exporting {a.get('function') or doc.path}", cancellable=False)
    try:
        reply = await asyncio.to_thread(export.export_model, doc.path, out, a.get("run"), a.get("function"),
                                        ls.state.store_root, ls.state.worker, doc.text, tune_missing=tune_missing,
                                        allow_untuned=a.get("allowUntuned") is True, tuned=build == "tuned",
                                        untuned=build == "untuned")
    except AsightError as err:
        raise RequestFailed(f"ASight: cannot export: {err}") from None
    finally:
        if token:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
    status = "ok" if export.export_ok(reply) else "failed"
    return {"schema": P.SCHEMA_COMMAND_RESULT, "command": P.CMD_EXPORT_MODEL, "status": status,
            "message": export.export_summary(reply), "run": None, "data": reply}


HANDLERS = {P.CMD_TUNE: tune, P.CMD_PROFILE: profile, P.CMD_CANCEL: cancel,
            P.CMD_SHOW_SEARCH_SPACE: show_search_space, P.CMD_SHOW_LOOP_VIEW: show_loop_view,
            P.CMD_APPLY_BEST_SCHEDULE: apply_best_schedule, P.CMD_COMPARE_RUNS: compare_runs,
            P.CMD_SHOW_CODE: show_code, P.CMD_EXPORT_MODEL: export_model,
            P.CMD_SHOW_MODEL: show_model}


def register(server) -> None:
    for name, handler in HANDLERS.items():
        server.command(name)(handler)
