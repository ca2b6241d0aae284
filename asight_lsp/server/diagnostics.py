"""textDocument/publishDiagnostics: static problems at once, TVM's debounced per document.

Static diagnostics (syntax, safety gate) come from the outline and are published on every change.
TVM parse / well-formedness problems come from the worker, per unit, cached by the unit's text: an
edit re-checks only the units it touched, after ``diagnostics_delay_ms`` without typing (at once
when a document opens).  A unit's TVM diagnostics are cleared as soon as its text changes and
come back only if the new text still has them.
"""
from __future__ import annotations

import asyncio
import hashlib
import json

from lsprotocol import types

from ..tvmscript.diagnostics import static_diagnostics, tvm_diagnostics, worker_failure, worker_units
from ..errors import WorkerError
from ..tvmscript.ranges import make_range
from ..tvmscript.model import Outline, Unit
from .convert import to_diagnostic
from ..tvmscript.outline_cache import DocumentOutline
from .state import DocState


def unit_key(unit: Unit, lines: list[str], outline: Outline, extra: str | None = None) -> str:
    """Identity of what TVM sees for a unit: its lines, the file's constants and aliases
    (``extra``: ``file_context(outline)``, computed once for all units of a file)."""
    body = "\n".join(lines[unit.start_line:unit.end_line + 1])
    extra = file_context(outline) if extra is None else extra
    return hashlib.sha1(f"{unit.kind}\x00{body}\x00{extra}".encode("utf-8", "replace")).hexdigest()


def file_context(outline: Outline) -> str:
    return json.dumps([outline.constants, outline.aliases], sort_keys=True, default=str)


def unit_keys(doc: DocState, units: list[Unit], lines: list[str], outline: Outline) -> dict[str, str]:
    """``unit_key`` of each unit by name.  A unit object of the outline stands for the same text
    while it lives (its chunk is cached by its text), so keys are kept by object and file context
    (the constants and aliases of the whole file, some maybe defined below the unit) across
    keystrokes: only the units an edit changed or moved are hashed again."""
    known = doc.memo.get("unitKeys", {})
    fresh, extra = {}, file_context(outline)
    for unit in units:
        hit = known.get(id(unit))
        if hit is None or hit[0] is not unit or hit[1] != extra:
            hit = (unit, extra, unit_key(unit, lines, outline, extra))
        fresh[id(unit)] = hit
    doc.memo["unitKeys"] = fresh
    return {unit.name: fresh[id(unit)][2] for unit in units}


def static_part(docout: DocumentOutline) -> list[dict]:
    """Syntax errors and safety-gate refusals; stand-in units of half-typed code add nothing."""
    outline = docout.outline
    if not docout.fallback:
        return static_diagnostics(outline)
    found = list(outline.syntax_errors)
    for unit in outline.units:
        if unit.name not in docout.fallback:
            found.extend(unit.problems)
    return found


def checkable_units(docout: DocumentOutline) -> list[Unit]:
    return [u for u in worker_units(docout.outline) if u.name not in docout.fallback]


def check_and_store(worker, doc: DocState, text: str, outline: Outline, units: list[Unit],
                    keys: dict[str, str]) -> list[dict]:
    """``tvm_diagnostics`` and keep the result per unit key (unit-relative lines); forget dead keys.

    A worker failure is returned as one diagnostic and not cached: the next edit tries again.
    """
    try:
        found, _ = tvm_diagnostics(worker, text, outline, units)
    except WorkerError as err:
        first = units[0]
        return [worker_failure(err, make_range(first.start_line, 0, first.start_line, 1))]
    for unit in units:
        doc.tvm_diagnostics[keys[unit.name]] = _relative(found.get(unit.name, []), -unit.start_line)
    live = set(keys.values())
    for key in list(doc.tvm_diagnostics):
        if key not in live:
            doc.tvm_diagnostics.pop(key, None)
    return []


def _relative(diags: list[dict], delta: int) -> list[dict]:
    out = []
    for d in diags:
        rng = d["range"]
        out.append({**d, "range": make_range(rng["start"]["line"] + delta, rng["start"]["character"],
                                             rng["end"]["line"] + delta, rng["end"]["character"])})
    return out


def cached_part(doc: DocState, units: list[Unit], keys: dict[str, str]) -> list[dict]:
    """TVM diagnostics known for units whose text is unchanged, moved to where the unit is now."""
    out = []
    for unit in units:
        known = doc.tvm_diagnostics.get(keys[unit.name])
        if known:
            out.extend(_relative(known, unit.start_line))
    return out


async def refresh(ls, doc: DocState, immediate: bool = False) -> None:
    """Publish static diagnostics now and TVM ones once the document is quiet."""
    docout = await ls.state.outline(doc)
    text = doc.outline_text    # the text of ``docout`` (an edit during the build makes a newer one)
    lines = docout.lines
    await asyncio.sleep(0)     # requests that waited for this outline answer first
    units = checkable_units(docout)
    keys = unit_keys(doc, units, lines, docout.outline)
    # a Python file that is not TVMScript at all gets nothing (its syntax is another tool's job)
    static = static_part(docout) if docout.outline.units or "tvm.script" in text else []
    publish(ls, doc, static + cached_part(doc, units, keys), unless_same=not immediate)
    if not ls.state.options.enabled("tvmDiagnostics"):
        return
    missing = [u for u in units if keys[u.name] not in doc.tvm_diagnostics]
    if not missing:
        return
    if not immediate:
        await asyncio.sleep(ls.state.options.diagnostics_delay_ms / 1000)
    worker = ls.state.worker
    # The check stores its findings itself: an edit that cancels this task does not waste them.
    failures = await asyncio.to_thread(check_and_store, worker, doc, text, docout.outline, missing, keys)
    ls.state.worker_failed(bool(failures))
    if doc.text is text and ls.state.docs.get(doc.uri) is doc:
        publish(ls, doc, static + cached_part(doc, units, keys) + failures)


def publish(ls, doc: DocState, diags: list[dict], unless_same: bool = False) -> None:
    """Send the document's diagnostics; ``unless_same``: not when they equal the last ones sent
    (a keystroke that moved no diagnostic: nothing for the client to redraw)."""
    diags = sorted(diags, key=lambda d: (d["range"]["start"]["line"], d["range"]["start"]["character"]))
    if unless_same and doc.memo.get("published") == diags:
        return
    doc.memo["published"] = diags
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
        uri=doc.uri, version=doc.version, diagnostics=[to_diagnostic(d) for d in diags]))


def schedule(ls, doc: DocState, immediate: bool = False) -> None:
    """(Re)start the document's diagnostics task; a newer edit cancels the older wait."""
    if doc.diagnostics_task is not None and not doc.diagnostics_task.done():
        doc.diagnostics_task.cancel()
    doc.diagnostics_task = asyncio.ensure_future(refresh(ls, doc, immediate))
    doc.diagnostics_task.add_done_callback(_log_failure(ls))


def _log_failure(ls):
    def done(task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            ls.window_log_message(types.LogMessageParams(type=types.MessageType.Error,
                                                         message=f"diagnostics failed: {task.exception()!r}"))
    return done


def clear(ls, uri: str) -> None:
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
