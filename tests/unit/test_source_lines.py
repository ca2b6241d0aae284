"""One text (issue 22): the gate, the outline, the worker and the LSP ranges split a file into the
lines Python's tokenizer (and VS Code) sees: only ``\\n``, ``\\r\\n`` and ``\\r`` end a line."""
from __future__ import annotations

import ast
import random

import pytest
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from asight_lsp.server.jsonrpc import spliced
from asight_lsp.tvmscript.diagnostics import check_text
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.pysource import source_lines
from tests.conftest import FIXTURES, fixture_text

# Line ends for str.splitlines() only: vertical tab, form feed, FS GS RS, NEL, LS, PS.
NOT_LINE_ENDS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
TEXT_CLASS = sorted(p.name for p in (FIXTURES / "hostile").glob("text_*.py"))


def tokenizer_lines(text: str) -> int:
    """How many lines Python's tokenizer reads in ``text`` (ending with a line end): the line of a
    statement after it, less one."""
    return ast.parse(text + "zz_end = 0\n").body[-1].lineno - 1


@pytest.mark.parametrize("char", list(NOT_LINE_ENDS))
def test_a_character_splitlines_breaks_at_does_not_end_a_line(char):
    text = f"# a{char}b\nx = 1\r\ny = 2\rz = 3\n"
    assert len(text.splitlines()) == 5
    assert source_lines(text) == [f"# a{char}b", "x = 1", "y = 2", "z = 3"]
    assert len(source_lines(text)) == tokenizer_lines(text)
    assert "".join(source_lines(text, keepends=True)) == text


def test_source_lines_is_splitlines_for_the_line_ends_python_knows():
    """The same lines as ``splitlines`` on the text with the other characters made plain."""
    rng = random.Random(7)
    parts = ["a", " ", "#", "\n", "\r", "\r\n", *NOT_LINE_ENDS]
    for _ in range(3000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 14)))
        plain = text.translate({ord(c): "." for c in NOT_LINE_ENDS})
        assert [len(line) for line in source_lines(text)] == [len(line) for line in plain.splitlines()], repr(text)
        assert [len(line) for line in source_lines(text, True)] == [len(line) for line in plain.splitlines(True)]
        assert "".join(source_lines(text, True)) == text


def test_a_form_feed_page_break_keeps_the_outline_on_pythons_lines():
    text = fixture_text("pagebreak.py")
    assert "\x0c" in text
    defs = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    result = check_text(text)
    outline = result.outline
    assert [u.name for u in outline.units] == ["add_one", "scale"] and result.diagnostics == []
    for unit in outline.units:
        node = defs[unit.name]
        assert unit.start_line == node.decorator_list[0].lineno - 1 and unit.end_line == node.end_lineno - 1
    for fn in outline.functions:
        assert fn.range["start"]["line"] == defs[fn.name].lineno - 1
        loops = [n for n in ast.walk(defs[fn.name]) if isinstance(n, ast.For)]
        assert [loop.range["start"]["line"] for loop in fn.loops] == [n.lineno - 1 for n in loops]


@pytest.mark.parametrize("name", TEXT_CLASS)
def test_a_prim_func_hidden_in_a_comment_is_a_comment(name):
    """The gate, the outline and the worker read ``ok`` where Python does; ``hidden`` is comment text."""
    text = fixture_text(f"hostile/{name}")
    assert text.startswith("# If executed, this creates the file ASIGHT_PWNED")
    outline = build_outline(text)
    assert [u.name for u in outline.units] == ["ok"] and [f.name for f in outline.functions] == ["ok"]
    [unit] = outline.units
    assert source_lines(text)[unit.start_line:unit.end_line + 1] == [
        "@T.prim_func", 'def ok(A: T.Buffer((8,), "float32")):', "    T.evaluate(0)"]
    assert unit.safe and not outline.syntax_errors


def test_an_edit_after_a_form_feed_lands_where_the_editor_put_it():
    """VS Code's positions count only ``\\n``, ``\\r\\n``, ``\\r`` (pygls' splitlines would also end
    a line at the form feed and put the edit one line too low)."""
    codec = PositionCodec(types.PositionEncodingKind.Utf16)
    text = "a = 1\n# page\x0c two\nb = 2\n"
    at = types.Position(2, 0)
    change = types.TextDocumentContentChangePartial(range=types.Range(at, at), text="c = 3\n")
    assert spliced(text, change, codec) == "a = 1\n# page\x0c two\nc = 3\nb = 2\n"
    at = types.Position(1, 99)
    change = types.TextDocumentContentChangePartial(range=types.Range(at, at), text="!")
    assert spliced(text, change, codec) == "a = 1\n# page\x0c two!\nb = 2\n"
