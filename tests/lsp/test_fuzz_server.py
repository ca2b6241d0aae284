"""A real ``asight serve --stdio`` under fuzzing and under repeated open/change/close (issue 14).

The fuzz is ``bench/fuzz_lsp.py``'s (the same generated and mutated documents, edits with
out-of-range and out-of-schema positions, every request, bad bodies), a few hundred documents
instead of 10,000: no death, no unanswered request, no internal error.  The memory test opens,
edits, queries and closes a 2,000-line file many times, each time with other names (nothing of an
earlier text can be reused), and checks that RSS after the warm-up grows less than a bound a real
leak exceeds several times over.  No timing is asserted.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import fuzz_cases  # noqa: E402
import fuzz_lsp  # noqa: E402


async def test_fuzzed_server_answers_every_request_without_internal_errors(tmp_path):
    fuzz_lsp.install_store(tmp_path, fuzz_cases.seed_texts()[5])
    args = SimpleNamespace(docs=300, seed=11, timeout=60.0, every=100, tvm_diagnostics=False,
                           json=str(tmp_path / "out" / "fuzz.json"))
    result = await fuzz_lsp.run_fuzz(args, tmp_path)
    print(json.dumps({k: result[k] for k in ("requests", "answer_codes", "rss_mb")}))
    assert result["documents_and_edits"] == 300 and result["requests"] > 300
    assert result["deaths"] == []
    assert result["unanswered"] == 0, result["unanswered_examples"]
    assert result["internal_errors"] == 0, result["internal_error_kinds"]
    assert result["exit_code"] == 0
    refused = result["answer_codes"].get("-32602", 0)   # out-of-range params were sent and refused cleanly
    assert refused > 0 and result["answer_codes"]["ok"] > 0


def big_module(lines: int, tag: int) -> str:
    """``matmul_bias_relu.py``'s IRModule repeated under names that carry ``tag``, to ``lines`` lines."""
    head, body = (ROOT / "fixtures" / "matmul_bias_relu.py").read_text().split("@I.ir_module", 1)
    parts, n = [head], 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append("@I.ir_module" + body.replace("class MatmulBiasRelu", f"class M{tag}_{n}")
                     .replace("def main", f"def main_{tag}_{n}"))
        n += 1
    return "".join(parts)


async def cycle(server, uri: str, text: str, version: int) -> None:
    """Open, edit (a line added near the top), ask what an editor asks, close."""
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                            "version": version, "text": text}})
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": [
        {"range": {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 0}}, "text": "\n"}]})
    doc = {"uri": uri}
    answers = await asyncio.gather(
        server.request("textDocument/codeLens", {"textDocument": doc}),
        server.request("textDocument/documentSymbol", {"textDocument": doc}),
        server.request("textDocument/hover", {"textDocument": doc, "position": {"line": 20, "character": 16}}),
        server.request("textDocument/inlayHint", {"textDocument": doc, "range": {
            "start": {"line": 0, "character": 0}, "end": {"line": 80, "character": 0}}}))
    assert all("result" in a for a in answers), answers
    assert answers[1]["result"]   # the symbols of this text
    server.notify("textDocument/didClose", {"textDocument": doc})


async def test_rss_stays_bounded_over_open_change_close_cycles(tmp_path):
    server = await fuzz_lsp.Server.start(tmp_path, tmp_path / "server.stderr")
    try:
        await fuzz_lsp.initialize(server, tmp_path, tvm_diagnostics=False)
        uris = [(tmp_path / f"doc{i}.py").as_uri() for i in range(3)]
        series = []
        for n in range(90):
            await cycle(server, uris[n % 3], big_module(2000, n), 2 * n + 1)
            if n in (15, 89):
                await server.request("asight/status", {})
                series.append(fuzz_lsp.rss_mb(server.pid))
        print(f"RSS after the warm-up {series[0]} MB, after 90 cycles {series[1]} MB; load {os.getloadavg()}")
        # one 2,000-line outline is ~1.7 MB: keeping the 74 texts after the warm-up would add 125 MB
        assert series[1] - series[0] < 40, series
    finally:
        assert await server.stop() == 0
