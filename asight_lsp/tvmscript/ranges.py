"""LSP ranges (0-based lines and characters) built from Python ``ast`` positions.

Python's ``ast`` gives 1-based lines and 0-based UTF-8 byte columns; LSP wants 0-based lines and
UTF-16 code-unit characters.  For the ASCII text TVMScript almost always is, both column kinds are
equal; ``to_utf16_col`` converts where a line holds other characters.
"""
from __future__ import annotations

from typing import Any


def make_range(start_line: int, start_char: int, end_line: int, end_char: int) -> dict:
    """A plain LSP ``Range`` dict (0-based)."""
    return {"start": {"line": start_line, "character": start_char},
            "end": {"line": end_line, "character": end_char}}


def to_utf16_col(line_text: str, byte_col: int) -> int:
    """Convert a UTF-8 byte offset inside ``line_text`` into a UTF-16 code-unit offset."""
    if line_text.isascii():
        return byte_col
    prefix = line_text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore")
    return len(prefix.encode("utf-16-le")) // 2


def node_range(node: Any, lines: list[str] | None = None, line_offset: int = 0) -> dict:
    """Range of an ``ast`` node; ``line_offset`` shifts lines parsed out of a chunk of the file."""
    start_line = node.lineno - 1 + line_offset
    end_line = (getattr(node, "end_lineno", None) or node.lineno) - 1 + line_offset
    start_col = node.col_offset
    end_col = getattr(node, "end_col_offset", None)
    if end_col is None:
        end_col = start_col
    if lines is not None:
        if 0 <= start_line < len(lines):
            start_col = to_utf16_col(lines[start_line], start_col)
        if 0 <= end_line < len(lines):
            end_col = to_utf16_col(lines[end_line], end_col)
    return make_range(start_line, start_col, end_line, end_col)


def line_range(lines: list[str], line: int, col: int = 0, end_col: int | None = None) -> dict:
    """Range on one 0-based line, by default from ``col`` to the end of the line's text."""
    text = lines[line] if 0 <= line < len(lines) else ""
    if end_col is None:
        end_col = max(len(text.rstrip()), col)
    return make_range(line, col, line, end_col)


def contains(outer: dict, line: int, character: int = 0) -> bool:
    """True when the 0-based position lies inside ``outer``."""
    start, end = outer["start"], outer["end"]
    if line < start["line"] or line > end["line"]:
        return False
    if line == start["line"] and character < start["character"]:
        return False
    if line == end["line"] and character > end["character"]:
        return False
    return True
