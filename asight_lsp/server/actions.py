"""textDocument/codeAction "Apply best schedule": two actions per function with a tuned run.

The edit's text comes from the TVM worker (``apply_best``), so it is computed only when an action
is chosen: through ``codeAction/resolve`` for clients that resolve edits lazily, else through the
``asight.applyBestSchedule`` command.  ``schedule_edit`` builds the workspace edit."""
from __future__ import annotations

import asyncio
import re

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from .. import protocol as P
from ..errors import AsightError
from ..services.schedules import apply_best, require_insertable
from ..tvmscript.model import Function
from .convert import to_range
from .lens import lens_line
from .state import find_function

KIND = "refactor.rewrite.asight"
MODES = {"trace": "insert the best trace as a schedule function", "script": "replace with the scheduled TVMScript"}


def action_titles(fn: Function, stale: bool) -> list[tuple[str, str]]:
    note = " (from a run of an older version)" if stale else ""
    return [(mode, f"ASight: apply best schedule of {fn.name} — {what}{note}") for mode, what in MODES.items()]


def schedule_function_text(fn: Function, trace: str, run_id: str) -> str:
    """The record's ``def apply_trace(sch)`` renamed for this function, ready to insert after it."""
    name = re.sub(r"\W", "_", f"schedule_{fn.name}")
    body = "\n".join(line for line in trace.strip("\n").splitlines() if not line.startswith("# from tvm"))
    body = re.sub(r"^def apply_trace\(sch: s_tir\.Schedule\)", f'def {name}(sch: "s_tir.Schedule")', body,
                  count=1, flags=re.M)
    body = re.sub(r"^def apply_trace\(", f"def {name}(", body, count=1, flags=re.M)
    run_id = re.sub(r"[^\w.-]", "_", run_id)      # a comment stays one line whatever a folder is named
    header = (f"# Best schedule of {fn.id} (ASight run {run_id}). Apply it with\n"
              f"#   from tvm import s_tir; sch = s_tir.Schedule(mod); {name}(sch)\n")
    return "\n\n\n" + header + body + "\n"


def indent_script(script: str, indent: str) -> str:
    lines = script.strip("\n").splitlines()
    return "\n".join((indent + line) if line.strip() else "" for line in lines)


def schedule_edit(uri: str, fn: Function, lines: list[str], unit_end: int, entry: dict, mode: str,
                  run_id: str) -> types.WorkspaceEdit:
    """The workspace edit for one ``apply_best`` entry ({script, trace}).

    ``trace`` mode inserts a schedule function after the unit; ``script`` mode replaces the
    function (decorators included) with the scheduled TVMScript of the worker.
    """
    if mode == "trace":
        end = unit_end
        at = types.Position(line=end, character=len(lines[end]) if end < len(lines) else 0)
        edit = types.TextEdit(range=types.Range(start=at, end=at), new_text=schedule_function_text(fn, entry["trace"], run_id))
    else:
        start = lens_line(fn, lines)
        end = fn.range["end"]["line"]
        indent = re.match(r"\s*", lines[start]).group(0) if start < len(lines) else ""
        script = _function_part(entry["script"], fn.name)
        rng = {"start": {"line": start, "character": 0}, "end": {"line": end, "character": len(lines[end])}}
        edit = types.TextEdit(range=to_range(rng), new_text=indent_script(script, indent))
    return types.WorkspaceEdit(changes={uri: [edit]})


def _function_part(script: str, name: str) -> str:
    """From a printed module (``@I.ir_module class Module: ...``) keep the decorated function."""
    lines = script.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"\s*@T\.prim_func", line)), None)
    if start is None:
        return script
    body = lines[start:]
    base = len(body[0]) - len(body[0].lstrip())
    out = []
    for k, line in enumerate(body):
        if k > 1 and line.strip() and len(line) - len(line.lstrip()) <= base and not line.lstrip().startswith(")"):
            break
        out.append(line[base:] if len(line) >= base else line.lstrip())
    text = "\n".join(out)
    return re.sub(r"def main\(", f"def {name}(", text, count=1) if name != "main" else text


class ScheduleUnavailable(Exception):
    """The function has no run, or the run has no schedule for it."""


async def compute_schedule_edit(ls, a: dict):
    """``(WorkspaceEdit, RunMeta, apply_best entry)`` for ``{uri, function, mode, run?}``."""
    mode = a.get("mode", "trace")
    if not isinstance(mode, str) or mode not in MODES:
        raise JsonRpcInvalidParams("'mode' must be 'trace' or 'script'")
    uri = a.get("uri")
    doc = ls.doc(uri)
    outline = (await ls.state.outline(doc)).outline
    fn = find_function(outline, a.get("function") if isinstance(a.get("function"), str) else None)
    if fn is None:
        raise JsonRpcInvalidParams(f"no function '{a.get('function')}' in {uri}")
    await ls.state.fresh_store()
    meta = ls.state.index.get(a["run"]) if isinstance(a.get("run"), str) else None
    if meta is None:
        result = ls.state.result(doc, fn, details=False)
        meta = result.meta if result else None
    if meta is None:
        raise ScheduleUnavailable(f"{fn.id} has no run yet: tune it first")
    unit = next(u for u in outline.units if u.name == fn.unit)
    try:
        reply = await asyncio.to_thread(apply_best, doc.path, fn.id, str(ls.state.index.run_dir(meta.id)),
                                        ls.state.store_root, ls.state.worker, doc.text)
    except AsightError as err:
        raise ScheduleUnavailable(f"cannot apply the best schedule of run {meta.id}: {err}") from None
    entries = reply.get("entries", [])
    entry = next((e for e in entries if e.get("function") in (fn.name, "main") and "script" in e), None)
    if entry is None:
        errors = "; ".join(e["error"] for e in entries if e.get("error"))
        raise ScheduleUnavailable(f"run {meta.id} has no schedule for {fn.id}" + (f" ({errors})" if errors else ""))
    edit = schedule_edit(doc.uri, fn, doc.lines, unit.end_line, entry, mode, meta.id)
    try:    # the very text that goes into the file: a check of an earlier text could be bypassed
        require_insertable(edit.changes[doc.uri][0].new_text, mode)
    except AsightError as err:
        raise ScheduleUnavailable(f"run {meta.id}: {err}") from None
    return edit, meta, entry


def resolves_edits(ls) -> bool:
    caps = ls.client_capabilities.text_document
    support = caps and caps.code_action and caps.code_action.resolve_support
    return bool(support and "edit" in (support.properties or []))


def export_actions(ls, doc, outline, rng: types.Range) -> list[types.CodeAction]:
    """``ASight: export the tuned model`` on a Relax function whose run has records (runs
    ``asight.exportModel``: a build of seconds to minutes, so a command with progress, not an edit)."""
    actions = []
    for fn in outline.functions:
        if fn.kind != "relax_function" or fn.range["end"]["line"] < rng.start.line \
                or fn.range["start"]["line"] > rng.end.line:
            continue
        result = ls.state.result(doc, fn)
        if result is None or result.running or result.meta.kind != "relax" or not result.meta.best_us:
            continue
        title = f"ASight: export the tuned model ({fn.id}, run {result.meta.id}) as a library"
        arg = {"uri": doc.uri, "function": fn.id, "run": result.meta.id}
        actions.append(types.CodeAction(title=title, kind=EXPORT_KIND, command=types.Command(
            title=title, command=P.CMD_EXPORT_MODEL, arguments=[arg])))
    return actions


EXPORT_KIND = "refactor.export.asight"   # a refactor kind: VS Code shows it in the light bulb (source.* only in a menu)


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite, EXPORT_KIND],
                                            resolve_provider=True))
    async def code_action(ls, params: types.CodeActionParams):
        doc = ls.doc(params.text_document.uri)
        outline = (await ls.state.outline(doc)).outline
        lazy = resolves_edits(ls)
        await ls.state.fresh_store()
        actions = export_actions(ls, doc, outline, params.range)
        for fn in outline.functions:
            if fn.kind != "prim_func" or fn.range["end"]["line"] < params.range.start.line \
                    or fn.range["start"]["line"] > params.range.end.line:
                continue
            result = ls.state.result(doc, fn)
            if result is None or result.best is None:
                continue
            for mode, title in action_titles(fn, result.stale):
                arg = {"uri": doc.uri, "function": fn.id, "mode": mode, "run": result.meta.id}
                command = None if lazy else types.Command(title=title, command=P.CMD_APPLY_BEST_SCHEDULE, arguments=[arg])
                actions.append(types.CodeAction(title=title, kind=KIND, data=arg, command=command))
        return actions

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls, action: types.CodeAction):
        if not isinstance(action.data, dict):
            raise JsonRpcInvalidParams("not an ASight code action")
        try:
            action.edit = (await compute_schedule_edit(ls, action.data))[0]
        except ScheduleUnavailable as err:
            action.disabled = types.CodeActionDisabled(reason=str(err))
        return action
