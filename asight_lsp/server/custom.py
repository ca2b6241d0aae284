"""Custom requests (``asight/runs``, ``asight/hotspots``, ``asight/searchSpace``, ``asight/loopView``,
``asight/stageGraph``, ``asight/principles``): one dispatch point.

Each method maps to a payload builder ``builder(PayloadRequest) -> dict``; a method whose builder
does not exist yet answers ``protocol.unavailable(...)``.  Wiring a builder from
``asight_lsp/views/`` is a one-line change in ``BUILDERS``.  Builders run off the event loop.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pygls.exceptions import JsonRpcInvalidParams

from .. import protocol as P
from ..errors import AsightError
from ..services.catalogue import Catalogue, Current, names_of, unreadable_note
from ..store.runs import RunMeta
from ..tvmscript.model import Function
from ..views.runs import runs_payload
from .state import ServerState, find_function


@dataclass
class PayloadRequest:
    """What a payload builder gets: the run (if any), its directory and the source function."""
    params: dict
    run: RunMeta | None
    run_dir: Path | None
    file: str | None
    text: str | None
    function: Function | None
    state: ServerState


def runs_request(req: PayloadRequest) -> dict:
    """``asight/runs``: the runs of a file / function (newest first), or of the whole store; a function's
    runs each with the catalogue's status for the document's text."""
    index, views, shown = req.state.index, None, None
    if req.file and req.function is not None:
        current = Current.of_text(req.text, [req.function], req.file) if req.text is not None else Current(file=req.file)
        metas, views, shown = Catalogue(index).listing(req.file, names_of(req.function), current)
    elif req.file:
        metas = list(reversed(index.for_file(req.file)))
    else:
        metas = list(reversed(index.metas()))
    refusal = req.state.results.refusal
    return runs_payload(metas, views, index.problems(), {m.id: refusal(m) for m in metas},
                        {m.id for m in metas if index.shipped(m.id)}, shown.meta.id if shown else None)


def view(kind: str) -> Callable[[PayloadRequest], dict]:
    """A builder of ``asight_lsp.views`` (``searchSpace``, ``loopView``, ``stageGraph``, ``principles``).

    Missing feature vectors are extracted through the TVM worker only in a trusted workspace.
    """
    def build(req: PayloadRequest) -> dict:
        from ..services.run_data import build_view
        from ..views.loops import graph_of
        if req.run_dir is None:  # only the stage graph exists before a run
            if req.function is None:
                return P.unavailable(P.SCHEMA_STAGE_GRAPH, "name a function (uri + function) or a run")
            return graph_of(req.function, req.text)      # the one rule of every surface (views.loops.graph_of)
        worker = req.state.worker if req.state.options.trusted else None
        task = req.params.get("task") if isinstance(req.params.get("task"), str) else None
        try:
            return build_view(kind, req.run_dir, text=req.text, worker=worker, task=task,
                              for_function=req.function.id if req.function is not None else None,
                              catalogue=Catalogue(req.state.index), file=req.file)
        except AsightError as err:   # e.g. a task the run does not have
            return P.unavailable(P.REQUEST_SCHEMAS.get(f"asight/{kind}", P.SCHEMA_STAGE_GRAPH), str(err))
    return build


def hotspots_payload(req: PayloadRequest) -> dict:
    """``asight/hotspots``: the run's profile (measured once, cached in the run) matched to the source."""
    from ..services.hotspots import collect
    from ..errors import AsightError
    if not req.state.options.trusted and not (req.run_dir / "profile.msgpack").exists():
        return P.unavailable(P.SCHEMA_HOTSPOTS, "hotspots need a profile, and profiling is disabled in an "
                                                "untrusted workspace")
    try:
        found = collect(req.file or req.run.file, str(req.run_dir), req.function.id if req.function else None,
                        req.state.store_root, req.state.worker, text=req.text)
    except AsightError as err:
        return P.unavailable(P.SCHEMA_HOTSPOTS, str(err))
    return {"status": P.STATUS_OK, **found}


def _unit_hint(req: PayloadRequest) -> str:
    """``: 'M' is a module of 2 functions: name one (M.f, M.g)`` when the request named a unit."""
    name = req.params.get("function")
    if req.file is None or not isinstance(name, str) or req.function is not None:
        return ""
    from ..tvmscript.outline import build_outline
    ids = [fn.id for fn in build_outline(req.text or "", str(req.file)).functions if fn.unit == name]
    return f": '{name}' is a module of {len(ids)} functions: name one ({', '.join(ids)})" if ids else ""


def code_payload(req: PayloadRequest) -> dict:
    """``asight/code``: the function's generated code at ``level`` linked to its source lines."""
    from ..services.codeview import code_view
    from ..errors import AsightError
    level, candidate = _code_params(req.params)
    if req.file is None or req.function is None:
        raise JsonRpcInvalidParams("asight/code needs 'uri' and 'function'" + _unit_hint(req))
    if level == "ptx" and not req.state.options.trusted:    # nvcc runs outside the sandbox
        return P.unavailable(P.SCHEMA_CODE, "the PTX level compiles the file's program with nvcc outside the "
                                            "sandbox, so it needs a trusted workspace; the other levels work here")
    try:
        return code_view(req.file, str(req.run_dir) if req.run_dir else None, candidate, level, req.function.id,
                         req.state.store_root, req.state.worker, text=req.text, serial=req.params.get("serial") is True,
                         task=req.params.get("task") if isinstance(req.params.get("task"), str) else None)
    except AsightError as err:
        return P.unavailable(P.SCHEMA_CODE, str(err))


def code_diff_payload(req: PayloadRequest) -> dict:
    """``asight/codeDiff``: two candidates' scheduled code, traces and decisions side by side."""
    from ..services.codeview import code_diff
    from ..errors import AsightError
    sides = [req.params.get(key) for key in ("a", "b")]
    if req.file is None or req.function is None or not all(isinstance(s, dict) and isinstance(s.get("run"), str)
                                                           for s in sides):
        raise JsonRpcInvalidParams("asight/codeDiff needs 'uri', 'function', 'a': {run, candidate?}, 'b': {...}")
    for side in sides:
        _code_params({"candidate": side.get("candidate")})
        if req.state.index.get(side["run"]) is None:
            raise JsonRpcInvalidParams(f"no run '{side['run']}'")
    try:
        return code_diff(req.file, *[{"run": str(req.state.index.run_dir(s["run"])), "candidate": s.get("candidate")}
                                     for s in sides], req.function.id, req.state.store_root, req.state.worker,
                         text=req.text)
    except AsightError as err:
        return P.unavailable(P.SCHEMA_CODE_DIFF, str(err))


def _code_params(params: dict) -> tuple[str, int | None]:
    level, candidate = params.get("level") or "scheduled", params.get("candidate")
    if level not in P.CODE_LEVELS:
        raise JsonRpcInvalidParams(f"'level' must be one of {', '.join(P.CODE_LEVELS)}")
    if candidate is not None and (not isinstance(candidate, int) or isinstance(candidate, bool) or candidate < 0):
        raise JsonRpcInvalidParams("'candidate' must be a trial index >= 0")
    return level, candidate


def model_payload(req: PayloadRequest) -> dict:
    """``asight/model``: per task of a tuned model, from the run's cached profile (the server makes
    one when a model's tuning ends)."""
    from ..store.caches import archived_profiles, load_profile
    from ..store.runs import Run
    from ..views.model import model_view
    from ..views.runs import run_summary
    from ..services.export import headline_of
    run = Run(req.run_dir)
    kept = [e["profile"] for e in archived_profiles(run)]
    build = headline_of(req.run) if req.run is not None and req.run.kind == "relax" else None
    return model_view(load_profile(run) or {}, run_summary(req.run), kept,
                      tuning=req.run.extra if req.run else None, build=build)


# method -> builder; None = not built yet (answers "unavailable").
BUILDERS: dict[str, Callable[[PayloadRequest], dict] | None] = {
    P.REQ_RUNS: runs_request,
    P.REQ_HOTSPOTS: hotspots_payload,
    P.REQ_SEARCH_SPACE: view("searchSpace"),
    P.REQ_LOOP_VIEW: view("loopView"),
    P.REQ_STAGE_GRAPH: view("stageGraph"),
    P.REQ_PRINCIPLES: view("principles"),
    P.REQ_CODE: code_payload,
    P.REQ_CODE_DIFF: code_diff_payload,
    P.REQ_MODEL: model_payload,
}
NEEDS_RUN = {P.REQ_HOTSPOTS, P.REQ_SEARCH_SPACE, P.REQ_LOOP_VIEW, P.REQ_PRINCIPLES, P.REQ_MODEL}


def plain(value: Any) -> Any:
    """JSON-like data as dicts and lists (pygls hands unknown methods' params over as namedtuples)."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def as_dict(params: Any) -> dict:
    """Request parameters as a plain dict; anything but an object (or nothing) is invalid."""
    params = plain(params)
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise JsonRpcInvalidParams("parameters must be a JSON object")
    return params


async def build_request(ls, params: dict) -> PayloadRequest:
    """Resolve ``uri`` / ``function`` / ``run`` of a request (any may be missing)."""
    await ls.state.fresh_store()
    state: ServerState = ls.state
    file = text = fn = None
    uri = params.get("uri")
    if uri is not None:
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams("'uri' must be a string")
        doc = ls.doc(uri)
        file, text = doc.path, doc.text
        outline = (await state.outline(doc)).outline if doc.is_open else None
        if outline is None:
            from ..tvmscript.outline import build_outline
            outline = build_outline(doc.text, doc.path)
        name = params.get("function")
        fn = find_function(outline, name if isinstance(name, str) else None)
        if isinstance(name, str) and fn is None and not any(u.name == name for u in outline.units):
            raise JsonRpcInvalidParams(f"no function '{name}' in {uri}")
    run = None
    run_id = params.get("run")
    if run_id is not None:
        if not isinstance(run_id, str):
            raise JsonRpcInvalidParams("'run' must be a run id")
        run = state.index.get(run_id)
        if run is None:
            raise JsonRpcInvalidParams(f"no run '{run_id}' in {state.index.runs_dir}")
    elif fn is not None and file is not None:
        result = state.result(doc, fn, details=False)     # the lens's run: the catalogue's, by the current text
        run = result.meta if result else None
    return PayloadRequest(params, run, state.index.run_dir(run.id) if run else None, file, text, fn, state)


def no_run_message(req: PayloadRequest) -> str:
    """Why a panel has no run: the function's unreadable run named, else none yet."""
    unreadable = req.state.index.unreadable_for(req.file, names_of(req.function)) if req.function is not None and req.file else []
    return unreadable_note(*unreadable[-1]) if unreadable else "no run yet: tune the function first"


async def dispatch(ls, method: str, params: Any) -> dict:
    """Answer one custom request with its payload (or ``unavailable``)."""
    schema = P.REQUEST_SCHEMAS[method]
    req = await build_request(ls, as_dict(params))
    builder = BUILDERS.get(method)
    if builder is None:
        return P.unavailable(schema, f"{method} is not available in this version of the server yet")
    if method in NEEDS_RUN and req.run is None:
        return P.unavailable(schema, no_run_message(req))
    payload = await asyncio.to_thread(builder, req)
    return payload if method == P.REQ_RUNS else with_unreadable(req, payload)   # the run list says it itself


def with_unreadable(req: PayloadRequest, payload: dict) -> dict:
    """A panel that shows another run of the function names the function's run that cannot be read
    first in its notes: the older run shown must not pass for the latest."""
    if not isinstance(payload, dict) or req.function is None or not req.file:
        return payload
    shown = req.run.id if req.run is not None else None
    unreadable = [u for u in req.state.index.unreadable_for(req.file, names_of(req.function)) if u[0] != shown]
    said = f"⚠ {unreadable_note(*unreadable[-1])}" if unreadable else None
    if said and isinstance(payload.get("notes"), list):
        payload["notes"] = [said] + payload["notes"]
    elif said and isinstance(payload.get("note"), (str, type(None))) and "note" in payload:    # the code view
        payload["note"] = " ".join(filter(None, [said + ".", payload["note"]]))
    return payload


def register(server) -> None:
    for method in P.REQUESTS:
        def make(method: str):
            async def handler(ls, params):
                return await dispatch(ls, method, params)
            handler.__name__ = "custom_" + method.split("/")[-1]
            return handler
        server.feature(method)(make(method))
