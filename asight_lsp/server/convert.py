"""Plain dicts of the domain modules -> lsprotocol types, and position helpers."""
from __future__ import annotations

from lsprotocol import types

from ..tvmscript.ranges import contains

class RawJSON(str):
    """A handler result that is already JSON text (ASCII): sent as it is (``app.AsightProtocol``)."""


SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
            "info": types.DiagnosticSeverity.Information, "hint": types.DiagnosticSeverity.Hint}


def to_position(pos: dict) -> types.Position:
    """An LSP position; a negative line or character (a range computed wrongly) becomes 0 rather
    than an exception that would cost the whole answer."""
    return types.Position(line=max(pos["line"], 0), character=max(pos["character"], 0))


def to_range(rng: dict) -> types.Range:
    return types.Range(start=to_position(rng["start"]), end=to_position(rng["end"]))


def range_json(rng: dict) -> dict:
    """An LSP range as plain JSON data (what ``to_range`` serializes to), negatives made 0."""
    start, end = rng["start"], rng["end"]
    return {"start": {"line": max(start["line"], 0), "character": max(start["character"], 0)},
            "end": {"line": max(end["line"], 0), "character": max(end["character"], 0)}}


def to_diagnostic(diag: dict) -> types.Diagnostic:
    return types.Diagnostic(range=to_range(diag["range"]), message=diag["message"],
                            severity=SEVERITY.get(diag.get("severity"), types.DiagnosticSeverity.Error),
                            source=f"asight/{diag.get('source', 'asight')}")


def position_dict(pos: types.Position) -> dict:
    return {"line": pos.line, "character": pos.character}


def range_contains(rng: dict, pos: types.Position) -> bool:
    return contains(rng, pos.line, pos.character)


def overlaps(rng: dict, window: types.Range) -> bool:
    """True when ``rng`` (dict) touches the lines of ``window`` (an LSP range)."""
    return rng["start"]["line"] <= window.end.line and rng["end"]["line"] >= window.start.line


def first_line_range(rng: dict, lines: list[str]) -> dict:
    """The part of ``rng`` on its first line (a selection range for symbols)."""
    line = rng["start"]["line"]
    text = lines[line] if 0 <= line < len(lines) else ""
    end = len(text.rstrip()) if rng["end"]["line"] != line else rng["end"]["character"]
    return {"start": dict(rng["start"]), "end": {"line": line, "character": max(end, rng["start"]["character"])}}
