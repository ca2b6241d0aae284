"""The language server's fast paths give what the plain ones give, after random edits (issue 14).

The fast paths: a per-document chunk cache with placement by copy, ``@I.ir_module`` classes read
member by member (``members.py``), a whole-file parse only when the chunk split may be wrong (``outline.split_may_be_wrong``), didChange applied as one splice,
symbols and lenses written as JSON text from templates.  Each is checked against the plain way on
a few hundred generated edits of a file made of the fixtures: the outline must be equal object for
object, the text equal to pygls' own edit, the JSON equal to lsprotocol's serialization.  Pure
(no TVM, no server process).
"""
from __future__ import annotations

import ast
import json
import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from asight_lsp.server.convert import to_range
from asight_lsp.server.diagnostics import unit_key, unit_keys
from asight_lsp.server.jsonrpc import spliced
from asight_lsp.server.lens import code_lens_json, lens_line, lens_list_json, module_lenses, static_lenses
from asight_lsp.server.symbols import outline_nodes, symbols_json
from asight_lsp.tvmscript import outline as outline_module
from asight_lsp.tvmscript.outline import ChunkCache
from asight_lsp.tvmscript.outline_cache import OutlineCache
from asight_lsp.tvmscript.pysource import split_chunks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PARTS = ("matmul64.py", "matmul_bias_relu.py", "softmax.py", "relax_cnn.py", "three_kernels.py", "conv2d_nhwc.py",
         "printed/legalized_cnn.py")
CONVERTER = default_converter()

# What a typing user does to a line: a character, Enter, a half-typed expression, a stray triple
# quote or bracket (the chunk split may be wrong then), a decorator line in the middle of a body.
SNIPPETS = ["x", " ", "\n", "+ (", ")", "]", '"""', "'''", "\\", ":", "\n@T.prim_func\n", "\ndef f():\n    pass\n",
            "N = 64\n", "é", "😋", "\t", "#"]


def document() -> str:
    return "".join((FIXTURES / name).read_text() + "\n" for name in PARTS)


def random_edit(rng: random.Random, text: str) -> str:
    """``text`` after one typing-like edit (or a paste that wraps lines in a string or brackets)."""
    lines = text.split("\n")
    line = rng.randrange(len(lines))
    col = rng.randint(0, len(lines[line]))
    kind = rng.random()
    if kind < 0.5:    # insert
        return apply(text, rng.choice(SNIPPETS), (line, col, line, col))
    if kind < 0.65:   # delete a few characters
        return apply(text, "", (line, col, line, min(col + rng.randint(1, 4), len(lines[line]))))
    if kind < 0.75:   # delete whole lines (or paste over them)
        end = min(line + rng.randint(1, 3), len(lines) - 1)
        return apply(text, rng.choice(["", "    x = T.alloc_buffer((4,), \"float32\")\n"]), (line, 0, end, 0))
    # wrap lines across a chunk boundary in a string or brackets: the file may parse while its
    # chunks do not (the split is wrong), or neither does
    end = min(line + rng.randint(5, 60), len(lines) - 1)
    opening, closing = rng.choice([('s = """', '"""'), ("s = r'''", "'''"), ("x = (", ")"), ("x = [", "]"),
                                   ("x = 1 + \\", "")])
    return "\n".join(lines[:line] + [opening] + lines[line:end] + [closing] + lines[end:])


def apply(text: str, new: str, where: tuple[int, int, int, int]) -> str:
    """``text`` with ``new`` put over (start line, start char, end line, end char), in code points."""
    lines = text.split("\n")
    a = sum(len(x) + 1 for x in lines[:where[0]]) + where[1]
    b = sum(len(x) + 1 for x in lines[:where[2]]) + where[3]
    return text[:a] + new + text[b:]


def edits(seed: int, count: int):
    """The texts of ``count`` random edits; one in five is undone at the next step (Ctrl+Z), and
    every third step starts again from the clean file, so that edits do not pile up into noise."""
    rng, clean = random.Random(seed), document()
    text = clean
    for step in range(count):
        before = clean if step % 3 == 0 else text
        text = random_edit(rng, before)
        yield text
        if rng.random() < 0.2:
            text = before
            yield text


def plain_build(cache: OutlineCache, text: str):
    """The outline as built before the fast paths: no chunk kept, every class parsed whole, the whole
    file parsed whenever a chunk fails."""
    cache.chunks = ChunkCache()
    with mock.patch.object(outline_module, "split_may_be_wrong", lambda *args: True), \
            mock.patch.object(outline_module, "split_class", lambda *args: None):
        return cache.build(text, "doc.py")


def same_outline(got, want) -> bool:
    """Equal, object for object, but for Python's syntax errors: a half-typed method parsed alone may
    get its error one line off, or another message, than in its whole class (``members.py``)."""
    if got.syntax_errors == want.syntax_errors:
        return got == want
    lines = [[e["range"]["start"]["line"] for e in o.syntax_errors] for o in (got, want)]
    near = len(lines[0]) == len(lines[1]) and all(abs(a - b) <= 1 for a, b in zip(*lines))
    return near and replace(got, syntax_errors=[]) == replace(want, syntax_errors=[])


def chunks_parse(text: str) -> bool:
    lines = text.splitlines()
    try:
        for start, end in split_chunks(lines):
            ast.parse("\n".join(lines[start:end + 1]))
    except (SyntaxError, ValueError):
        return False
    return True


@pytest.mark.parametrize("seed", [1, 2, 3, 7])
def test_outline_after_edits_is_the_outline_built_from_scratch(seed):
    fast, plain = OutlineCache(), OutlineCache()
    broken = split_wrong = 0
    for text in edits(seed, 120):
        got, want = fast.build(text, "doc.py"), plain_build(plain, text)
        assert same_outline(got.outline, want.outline), text
        assert got.fallback == want.fallback
        assert got.lines == text.splitlines()
        broken += bool(want.outline.syntax_errors)
        split_wrong += not want.outline.syntax_errors and not chunks_parse(text)
    assert broken > 10 and split_wrong   # both were exercised: fallbacks, and a file whose chunks do not parse


def test_chunk_cache_keeps_only_the_last_two_texts():
    cache = OutlineCache()
    texts = list(edits(4, 60))
    for text in texts:
        cache.build(text, "doc.py")
    held = sum(len(key[0]) for key in cache.chunks.entries)
    assert held <= len(texts[-1]) + len(texts[-2]) + 10


def lsp_symbols(nodes: list[dict]) -> list[types.DocumentSymbol]:
    """The answer as it was written before the JSON templates: lsprotocol objects."""
    return [types.DocumentSymbol(name=n["name"], detail=n["detail"], kind=n["kind"], range=to_range(n["range"]),
                                 selection_range=to_range(n["sel"]), children=lsp_symbols(n["children"]))
            for n in nodes]


def lsp_symbol_information(nodes: list[dict], uri: str, container: str | None = None) -> list:
    out = []
    for n in nodes:
        out.append(types.SymbolInformation(name=n["name"], kind=n["kind"], container_name=container,
                                           location=types.Location(uri=uri, range=to_range(n["range"]))))
        out.extend(lsp_symbol_information(n["children"], uri, n["name"]))
    return out


@pytest.mark.parametrize("seed", [5, 6])
def test_symbols_and_lenses_as_json_text_match_lsprotocol_after_edits(seed):
    cache, doc = OutlineCache(), SimpleNamespace(uri="file:///doc.py", memo={})
    for text in edits(seed, 80):
        docout = cache.build(text, "doc.py")
        outline, lines = docout.outline, docout.lines
        nodes = outline_nodes(outline, lines)
        assert json.loads(symbols_json(doc, outline, lines, True)) == CONVERTER.unstructure(lsp_symbols(nodes))
        flat = CONVERTER.unstructure(lsp_symbol_information(nodes, doc.uri))
        assert json.loads(symbols_json(doc, outline, lines, False)) == flat
        for fn in outline.functions:
            lenses = static_lenses(doc.uri, fn, lens_line(fn, lines))
            objects = [types.CodeLens(range=types.Range(start=types.Position(line, 0), end=types.Position(line, 0)),
                                      command=types.Command(title=title, command=command, arguments=[arg],
                                                            tooltip=rest[0] if rest else None))
                       for line, title, command, arg, *rest in lenses]
            assert json.loads("[" + code_lens_json(lenses) + "]") == CONVERTER.unstructure(objects)


@pytest.mark.parametrize("seed", [3, 9])
def test_lenses_from_line_free_templates_are_the_lenses_written_afresh_after_edits(seed):
    """``lens_list_json`` keeps each function's static lenses as a template across edits (an Enter
    moves every function below it): the answer is the one written from scratch for every text."""
    ls = SimpleNamespace(state=SimpleNamespace(result=lambda *args, **kwargs: None,
                                               index=SimpleNamespace(unreadable_for=lambda *args: [])))
    cache, doc = OutlineCache(), SimpleNamespace(uri="file:///-7770777077 doc.py", memo={}, text="", path="doc.py")
    for text in edits(seed, 80):
        docout = cache.build(text, "doc.py")
        outline, lines = docout.outline, docout.lines
        doc.text = text
        fresh = [code_lens_json(module_lenses(doc.uri, outline, lines))] + \
            [code_lens_json(static_lenses(doc.uri, fn, lens_line(fn, lines))) for fn in outline.functions]
        assert json.loads(str(lens_list_json(ls, doc, outline, lines))) == json.loads("[" + ", ".join(p for p in fresh if p) + "]")


TEXTS = ["", "a", "a\n", "a\nb", "ab\r\ncd\r\n", "x = '😋é'\ny\n\n", "\n\n\n", "def f():\n    return 1\n"]


def client_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@pytest.mark.parametrize("seed", range(4))
def test_spliced_change_is_pygls_change_for_positions_in_the_text(seed):
    """Every position a client can send (line up to one past the last, character up to the line's
    end in UTF-16 units): the splice gives pygls' own incremental edit."""
    rng = random.Random(seed)
    codec = PositionCodec(types.PositionEncodingKind.Utf16)
    for _ in range(300):
        text = rng.choice(TEXTS) + rng.choice(TEXTS)
        lines = text.splitlines(True)

        def position() -> types.Position:
            line = rng.randint(0, len(lines))
            content = lines[line].splitlines()[0] if line < len(lines) else ""
            cut = rng.randint(0, len(content))   # never inside a surrogate pair
            return types.Position(line, client_units(content[:cut]) if line < len(lines) else 0)
        a, b = sorted([position(), position()], key=lambda p: (p.line, p.character))
        change = types.TextDocumentContentChangePartial(range=types.Range(a, b), text=rng.choice(["", "z", "\n", "😋"]))
        pygls_doc = TextDocument("file:///t.py", text)
        pygls_doc.apply_change(types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(a.line, a.character), types.Position(b.line, b.character)),
            text=change.text))
        assert spliced(text, change, codec) == pygls_doc.source, (text, change)


def test_spliced_change_clamps_positions_past_the_end_as_lsp_says():
    codec = PositionCodec(types.PositionEncodingKind.Utf16)

    def change(text, a, b, new="!"):
        return spliced(text, types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(*a), types.Position(*b)), text=new), codec)
    assert change("abc\ndef", (0, 99), (0, 99)) == "abc!\ndef"      # past the line's end: its end
    assert change("abc", (0, 99), (0, 99)) == "abc!"                 # (pygls: "ab!c")
    assert change("abc\n", (1, 0), (1, 0)) == "abc\n!"               # the empty last line
    assert change("abc\n", (7, 3), (9, 0)) == "abc\n!"               # past the text: its end
    assert change("abc", (0, 2), (0, 1)) == "ab!c"                   # reversed: replaces nothing
    assert change("a😋b", (0, 3), (0, 4)) == "a😋!"                   # UTF-16 units


def test_unit_keys_kept_by_object_are_the_plain_keys_after_edits():
    """TVM diagnostics are cached by unit key; keys kept across keystrokes must be the keys."""
    cache, doc = OutlineCache(), SimpleNamespace(memo={})
    texts = list(edits(9, 60))
    base = (FIXTURES / "matmul64.py").read_text() + "\n" + (FIXTURES / "softmax.py").read_text()
    texts += [base + "\nN = 1\n", base + "\nN = 2\n"]   # a constant in a chunk below a unit changes: a new key
    keys = []
    for text in texts:
        docout = cache.build(text, "doc.py")
        units = [u for u in docout.outline.units if u.name not in docout.fallback]
        got = unit_keys(doc, units, docout.lines, docout.outline)
        assert got == {u.name: unit_key(u, docout.lines, docout.outline) for u in units}
        keys.append(got)
    assert keys[-1]["matmul64"] != keys[-2]["matmul64"]
