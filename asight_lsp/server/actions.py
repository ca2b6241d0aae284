"""textDocument/codeAction "Apply best schedule": two actions per function with a tuned run, each
running ``asight.applyBestSchedule`` (the text comes from the TVM worker, so it is computed when
chosen, not for every cursor move).  ``schedule_edit`` builds the workspace edit itself."""
from __future__ import annotations

import re

from lsprotocol import types

from .. import protocol as P
from ..sourcemap import Function
from .convert import to_range
from .lens import lens_line

KIND = "refactor.rewrite.asight"
MODES = {"trace": "insert the best trace as a schedule function", "script": "replace with the scheduled TVMScript"}


def action_titles(fn: Function, stale: bool) -> list[tuple[str, str]]:
    note = " (from a run of an older version)" if stale else ""
    return [(mode, f"ASight: apply best schedule of {fn.name} — {what}{note}") for mode, what in MODES.items()]


def schedule_function_text(fn: Function, trace: str, run_id: str) -> str:
    """The record's ``def apply_trace(sch)`` renamed for this function, ready to insert after it."""
    name = re.sub(r"\W", "_", f"schedule_{fn.name}")
    body = trace.strip("\n")
    body = re.sub(r"^def apply_trace\(", f"def {name}(", body, count=1, flags=re.M)
    header = f"# Best schedule of {fn.id} found by ASight run {run_id}: apply it with {name}(s_tir.Schedule(mod)).\n"
    return "\n\n" + header + body + "\n"


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


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite]))
    async def code_action(ls, params: types.CodeActionParams):
        doc = ls.doc(params.text_document.uri)
        outline = (await ls.state.outline(doc)).outline
        actions = []
        for fn in outline.functions:
            if fn.kind != "prim_func" or fn.range["end"]["line"] < params.range.start.line \
                    or fn.range["start"]["line"] > params.range.end.line:
                continue
            result = ls.state.result(doc, fn)
            if result is None or result.best is None:
                continue
            for mode, title in action_titles(fn, result.stale):
                arg = {"uri": doc.uri, "function": fn.id, "mode": mode, "run": result.meta.id}
                actions.append(types.CodeAction(title=title, kind=KIND, command=types.Command(
                    title=title, command=P.CMD_APPLY_BEST_SCHEDULE, arguments=[arg])))
        return actions
