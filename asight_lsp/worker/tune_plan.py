"""The start of a tuning job's plan (``worker/tune_job.py``): the run's selection parsed from its
``source.py`` (``parse_selection``); ``InputProblem`` when the source or the request is wrong.
"""
from __future__ import annotations


class InputProblem(Exception):
    """The source (kind "input": the CLI exits 1) or the request (kind "usage", e.g. an unknown
    target: exit 2) is wrong; the message is one line."""

    def __init__(self, message: str, kind: str = "input"):
        super().__init__(message)
        self.kind = kind


def parse_selection(run, meta, update) -> tuple[object, str | None]:
    """The run's selection parsed from its ``source.py`` (``run``: ``store.runs.Run``, ``meta`` its
    run.json): the unit (PrimFunc or IRModule) and the member function to tune (or None).  A unit
    that does not parse is an ``InputProblem``, located, and kept in run.json (``update``, ``extra.problem``)."""
    from ..tvmscript.outline import build_outline
    from ..tvmscript.pysource import source_lines
    from ..engine.targets import runs_on_device
    from .parse import error_to_problem, parse_unit, require_no_native_calls
    selection = meta.extra.get("selection") or {}
    text = run.source_path.read_text(encoding="utf-8")
    outline = build_outline(text, meta.file)
    unit = next((u for u in outline.units if u.name == selection.get("unit")), None)
    if unit is None:
        raise InputProblem(f"{meta.file}: unit {selection.get('unit')!r} not found")
    spec = {"start_line": unit.start_line, "end_line": unit.end_line}
    try:
        parsed = parse_unit(source_lines(text), spec, outline.constants, outline.aliases)
        # the native-call rule for the run's target: a CPU build may not call device-library names
        require_no_native_calls(parsed, device=runs_on_device(meta.extra.get("target_spec")))
    except Exception as err:  # noqa: BLE001  DiagnosticError, SyntaxError, ... -> a located message
        problem = error_to_problem(err)
        problem["unit"] = unit.name
        update(extra={**run.load().extra, "problem": problem})
        raise InputProblem(f"{meta.file}:{problem['line']}:{problem['col']}: {problem['message']}") from None
    return parsed, selection.get("member")
