"""What ``bench/fuzz_lsp.py`` sends: generated and mutated documents, edits, and requests with good,
out-of-range and out-of-schema params (every request the server supports, custom ``asight/*``
requests, ``executeCommand`` with bad arguments, unknown methods, malformed messages).

Everything is drawn from one ``random.Random``, so a seed reproduces a run.  No tuning or profiling:
the server is initialized untrusted, and nothing here switches trust back on.
"""
from __future__ import annotations

import random
import string
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["asight.tune", "asight.profile", "asight.cancel", "asight.showSearchSpace", "asight.showLoopView",
            "asight.applyBestSchedule", "asight.compareRuns", "asight.showCode"]
CUSTOM = ["asight/runs", "asight/hotspots", "asight/searchSpace", "asight/loopView", "asight/stageGraph",
          "asight/principles", "asight/code", "asight/codeDiff", "asight/status"]
UNKNOWN = ["textDocument/definition", "textDocument/completion", "asight/nope", "foo", "", "$/unknownRequest",
           "workspace/symbol", "textDocument/formatting"]
ODD_TEXT = ["\ud800", "\udfff", "\x00", "😀", "𝔘", "é", "\u2028", "\u0085", "\x0c", "\r", "\r\n", "\t", "\\",
            "'''", '"', "#", "(", ")", "[", "]", ":", "@", "@T.prim_func", "@I.ir_module", "def ", "class ",
            "T.sblock(", "for i in T.grid(", "with T.sblock(\"x\"):", "    ", "\n", "\n\n@T.prim_func\ndef f():\n"]
BIG_INTS = [-1, -2**31, 2**31 - 1, 2**31, 2**32, 2**63, -2**63, 10**30]


def seed_texts() -> list[str]:
    """Fixture files and bench workloads (hostile fixtures excluded: the gate is not what we fuzz)."""
    paths = sorted(ROOT.glob("fixtures/*.py")) + sorted(ROOT.glob("fixtures/broken/*.py")) + \
        sorted(ROOT.glob("bench/workloads/*.py"))
    return [p.read_text() for p in paths]


# --------------------------------------------------------------------------- documents


def random_text(rng: random.Random, size: int) -> str:
    kind = rng.randrange(4)
    if kind == 0:  # random bytes read as a client would (latin-1: every byte a character)
        return bytes(rng.randrange(256) for _ in range(size)).decode("latin-1")
    if kind == 1:  # any code point, lone surrogates included
        return "".join(chr(rng.choice([rng.randrange(0x80), rng.randrange(0x110000)])) for _ in range(size))
    if kind == 2:
        return "".join(rng.choice(string.printable) for _ in range(size))
    return "".join(rng.choice(ODD_TEXT) for _ in range(max(1, size // 8)))


def deep_text(rng: random.Random) -> str:
    depth = rng.choice([50, 99, 100, 150, 1000, 5000])
    kind = rng.randrange(4)
    if kind == 0:
        return "x = " + "(" * depth + "1" + ")" * depth + "\n"
    if kind == 1:
        return "x = " + "[" * depth + "]" * depth + "\n"
    if kind == 2:  # a loop nest inside a prim_func, as deep as Python's indentation limit allows and beyond
        body = ["@T.prim_func", "def deep(A: T.Buffer((8,), \"float32\")):"]
        for d in range(min(depth, 120)):
            body.append("    " * (d + 1) + f"for i{d} in range(2):")
        body.append("    " * (min(depth, 120) + 1) + "with T.sblock(\"b\"):")
        body.append("    " * (min(depth, 120) + 2) + "A[0] = A[0] + T.float32(1)")
        return "from tvm.script import tirx as T\n\n" + "\n".join(body) + "\n"
    return "@T.prim_func\ndef f():\n    x = " + "-" * depth + "1\n    y = " + "a." * depth + "b\n"


def big_text(rng: random.Random, seeds: list[str], lines: int) -> str:
    """About ``lines`` lines of fixture units (renamed so names stay unique)."""
    out, n = [], 0
    while sum(t.count("\n") for t in out) < lines:
        out.append(rng.choice(seeds).replace("class ", f"class C{n}_").replace("def ", f"def f{n}_"))
        n += 1
    return "\n".join(out)


def pathological(rng: random.Random, seeds: list[str]) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return ""
    if kind == 1:
        return "x" * rng.choice([10**5, 10**6])                            # one long line
    if kind == 2:
        return "\n" * rng.choice([10**4, 10**5])                           # many empty lines
    if kind == 3:
        return big_text(rng, seeds, rng.choice([3000, 20000]))
    if kind == 4:
        return "@T.prim_func\n" * 2000 + "def f():\n    pass\n"           # a decorator pile
    return "# " + "é😀" * 300_000 + "\n"                                  # > 1 MB of non-ASCII


def mutate(rng: random.Random, text: str, seeds: list[str]) -> str:
    for _ in range(rng.randint(1, 4)):
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        op = rng.randrange(10)
        if op == 0:
            del lines[i:i + rng.randint(1, 5)]
        elif op == 1:
            lines[i:i] = lines[i:i + rng.randint(1, 8)]
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            k = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:k] + rng.choice(ODD_TEXT) + lines[i][k:]
        elif op == 4:
            lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)]                  # half-typed line
        elif op == 5:
            lines[i] = " " * rng.choice([1, 2, 3, 5]) + lines[i]                    # broken indentation
        elif op == 6:
            return "\n".join(lines[:i])                                              # truncated file
        elif op == 7:
            lines[i] = "".join(str(rng.choice(BIG_INTS)) if c.isdigit() else c for c in lines[i])
        elif op == 8:
            other = rng.choice(seeds).split("\n")
            lines[i:i] = other[rng.randrange(len(other)):][:rng.randint(1, 30)]
        else:
            sep = rng.choice(["\r\n", "\r", "\n", "\u2028", "\x0c\n"])
            return sep.join(lines)
        text = "\n".join(lines)
    return text


def document(rng: random.Random, seeds: list[str], big_every: int = 400) -> str:
    """A new document: mostly mutated fixtures, sometimes random, deep or pathological."""
    roll = rng.random()
    if roll < 1 / big_every:
        return pathological(rng, seeds)
    if roll < 0.12:
        return random_text(rng, rng.choice([0, 1, 10, 200, 5000]))
    if roll < 0.18:
        return deep_text(rng)
    if roll < 0.25:
        return rng.choice(seeds)
    return mutate(rng, rng.choice(seeds), seeds)


# --------------------------------------------------------------------------- edits


def position(rng: random.Random, lines: list[str], valid: bool = True) -> dict:
    if valid:
        line = rng.randrange(len(lines) + 1)
        width = len(lines[line]) if line < len(lines) else 0
        return {"line": line, "character": rng.randrange(width + 2)}
    odd = BIG_INTS + [len(lines) + 5, 10**6]
    return {"line": rng.choice(odd + [0]), "character": rng.choice(odd + [0])}


def edit(rng: random.Random, text: str, seeds: list[str]) -> tuple[list[dict], str | None]:
    """Content changes and the client's new text (None: the change is out of range; resend the text)."""
    if rng.random() < 0.15:
        new = mutate(rng, text, seeds) if text else document(rng, seeds)
        return [{"text": new}], new
    lines = text.split("\n")
    valid = rng.random() < 0.9
    a, b = position(rng, lines, valid), position(rng, lines, valid)
    if valid:
        a, b = sorted([a, b], key=lambda p: (p["line"], p["character"]))
    insert = rng.choice(["", rng.choice(ODD_TEXT), random_text(rng, rng.randrange(1, 40)),
                         "\n".join(rng.choice(seeds).split("\n")[:rng.randint(1, 12)])])
    change = {"range": {"start": a, "end": b}, "text": insert}
    if not valid:
        return [change], None
    return [change], apply_change(lines, a, b, insert)


def apply_change(lines: list[str], a: dict, b: dict, insert: str) -> str:
    """What the server's document becomes (code points, as the client counts for this bench)."""
    def offset(pos):
        line = min(pos["line"], len(lines))
        before = sum(len(x) + 1 for x in lines[:line])
        return before + min(pos["character"], len(lines[line]) if line < len(lines) else 0)
    text = "\n".join(lines)
    return text[:offset(a)] + insert + text[offset(b):]


# --------------------------------------------------------------------------- requests


def odd_value(rng: random.Random):
    return rng.choice([None, True, 0, -1, 2**31, 1.5, "", "x", "file:///", [], [1, "a"], {}, {"a": {"b": [None]}},
                       {"line": -1, "character": 0}, "\ud800", "😀" * 100])


def text_document(rng: random.Random, uri: str, uris: list[str]) -> object:
    roll = rng.random()
    if roll < 0.85:
        return {"uri": uri}
    if roll < 0.9:
        return {"uri": rng.choice(uris + ["file:///nonexistent/x.py", "untitled:Untitled-1", "", "file://",
                                           "file:///%zz", "http://example.com/a.py", "file:///" + "a" * 5000])}
    return rng.choice([{}, {"uri": None}, {"uri": 5}, [], None, "x"])


def lsp_range(rng: random.Random, lines: list[str]) -> dict:
    valid = rng.random() < 0.8
    a, b = position(rng, lines, valid), position(rng, lines, valid)
    return {"start": a, "end": b}


def function_name(rng: random.Random, text: str):
    names = [w.split("(")[0] for w in text.replace(":", " ").split() if "(" in w][:50]
    return rng.choice(names + ["main", "matmul64", "MatmulBiasRelu.main", "nope", None, 5, ""])


def command_arguments(rng: random.Random, uri: str, text: str) -> object:
    roll = rng.random()
    if roll < 0.1:
        return rng.choice([None, [], "x", [1], ["a", "b"], [{}, {}], {"uri": uri}])
    arg = {"uri": rng.choice([uri, uri, None, 5, "file:///nope.py"]), "function": function_name(rng, text)}
    for key, values in {"run": ["mbr128", "nope", 5, None], "mode": ["trace", "script", "x"],
                        "runs": [["mbr128", "mbr128"], ["a"], "x"], "trials": [-3, 0, 1.5, "x", 2**40],
                        "level": ["scheduled", "lowered", "x", None], "candidate": [0, -1, 10**9, "x"],
                        "apply": [False]}.items():
        if rng.random() < 0.3:
            arg[key] = rng.choice(values)
    if rng.random() < 0.1:
        arg = {k: odd_value(rng) for k in arg}
    return [arg]


def request(rng: random.Random, uri: str, text: str, uris: list[str]) -> tuple[str, object]:
    """``(method, params)`` of one request about the document ``uri`` (or something else)."""
    lines = text.split("\n")
    td = text_document(rng, uri, uris)
    roll = rng.randrange(100)
    if roll < 14:
        return "textDocument/hover", {"textDocument": td, "position": position(rng, lines, rng.random() < 0.8)}
    if roll < 28:
        return "textDocument/codeLens", {"textDocument": td}
    if roll < 40:
        return "textDocument/inlayHint", {"textDocument": td, "range": lsp_range(rng, lines)}
    if roll < 52:
        return "textDocument/documentSymbol", {"textDocument": td}
    if roll < 60:
        return "textDocument/codeAction", {"textDocument": td, "range": lsp_range(rng, lines),
                                           "context": rng.choice([{"diagnostics": []}, {}, None])}
    if roll < 63:
        data = rng.choice([{"uri": uri, "function": function_name(rng, text), "mode": "trace", "run": "mbr128"},
                           odd_value(rng), {"uri": uri, "mode": "x"}])
        return "codeAction/resolve", rng.choice([{"title": "x", "data": data}, {"data": data}, {"title": 5}])
    if roll < 73:
        command = rng.choice(COMMANDS[2:] * 3 + COMMANDS[:2] + ["asight.nope", ""])
        return "workspace/executeCommand", {"command": command, "arguments": command_arguments(rng, uri, text)}
    if roll < 85:
        params = command_arguments(rng, uri, text)
        params = params[0] if isinstance(params, list) and params else params
        if rng.random() < 0.2 and isinstance(params, dict):
            params.update({"a": {"run": rng.choice(["mbr128", 5])}, "b": {"run": "mbr128", "candidate": 0}})
        return rng.choice(CUSTOM), params
    if roll < 90:
        return rng.choice(UNKNOWN), rng.choice([{"textDocument": td}, None, odd_value(rng)])
    method = rng.choice(["textDocument/hover", "textDocument/codeLens", "textDocument/inlayHint",
                         "textDocument/documentSymbol", "textDocument/codeAction", "workspace/executeCommand"])
    return method, out_of_schema(rng, uri)


def out_of_schema(rng: random.Random, uri: str) -> object:
    """Params that do not fit the method's schema (wrong types, missing fields, odd positions)."""
    roll = rng.randrange(6)
    if roll == 0:
        return odd_value(rng)
    if roll == 1:
        return {"textDocument": {"uri": uri}}
    if roll == 2:
        return {"textDocument": {"uri": uri}, "position": {"line": rng.choice(BIG_INTS), "character": 0},
                "range": {"start": {"line": -1, "character": -1}, "end": {"line": 2**40, "character": 0}}}
    if roll == 3:
        return {"textDocument": {"uri": uri}, "position": {"line": "3", "character": None}}
    if roll == 4:
        return {"command": odd_value(rng), "arguments": odd_value(rng)}
    return {"textDocument": {"uri": uri}, "position": {"line": 1.5, "character": 2},
            "range": {"start": {"line": 0}, "end": {}}}


def notification(rng: random.Random, uri: str, text: str) -> tuple[str, object]:
    """An odd notification: unknown, malformed, or about documents the server does not have."""
    lines = text.split("\n")
    roll = rng.randrange(7)
    if roll == 0:
        return "textDocument/didChange", {"textDocument": {"uri": "file:///never-opened.py", "version": 3},
                                          "contentChanges": [{"text": "x"}]}
    if roll == 1:
        return "textDocument/didClose", {"textDocument": {"uri": rng.choice(["file:///never-opened.py", 5, ""])}}
    if roll == 2:
        return "$/cancelRequest", {"id": rng.choice([1, "x", 10**9, None])}
    if roll == 3:
        return rng.choice(["asight/nope", "$/setTrace", "foo"]), odd_value(rng)
    if roll == 4:
        return "workspace/didChangeConfiguration", {"settings": rng.choice([
            None, 5, {"asight": {"trials": "x", "diagnosticsDelayMs": -5, "disabledFeatures": "x"}},
            {"asight": {"storeRoot": rng.choice([5, "", None])}}])}
    if roll == 5:
        return "textDocument/didChange", {"textDocument": {"uri": uri, "version": 1},
                                          "contentChanges": [{"range": lsp_range(rng, lines), "text": 5}]}
    return "textDocument/didOpen", {"textDocument": {"uri": uri, "text": None}}


def malformed_body(rng: random.Random) -> bytes:
    """A body that is not a JSON-RPC message at all (framing stays intact)."""
    return rng.choice([b"{", b"not json", b"[]", b"[1, 2]", b"42", b'"x"', b"null", b"{}", b'{"jsonrpc": "2.0"}',
                       b'{"jsonrpc": "1.0", "id": 1, "method": "x"}', b'{"jsonrpc": "2.0", "id": 9, "method": 5}',
                       b'{"jsonrpc": "2.0", "id": [1], "method": "textDocument/hover"}',
                       b'{"jsonrpc": "2.0", "id": 1.5, "method": "asight/status"}',
                       b'{"jsonrpc": "2.0", "method": "textDocument/hover", "params": {"jsonrpc": "2.0"}}',
                       b"\xff\xfe\x00garbage"])
