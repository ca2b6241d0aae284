"""Before → after per block through the real stdio server: with a cached profile in which relu got
slower after tuning, the hover on relu flags it with what mbr128's best schedule did to it, and
its inlay hint carries ⚠.  The per-block figures are written into the run's profile cache (made
up for the test: a profile measures the machine it runs on); the schedule is the run's real trace."""
from __future__ import annotations

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import CONFIG, ident, initialize, open_doc

OPTIONS = {"disabledFeatures": ["tvmDiagnostics"]}
FN = "MatmulBiasRelu.main"


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def _blocks(us: dict[str, float], shared: bool) -> list[dict]:
    note = "stage shared with {} (split by FLOPs)"
    return [{"id": f"{FN}/{name}", "name": name, "us": value, "share": value / sum(us.values()),
             "attribution": note.format("bias_add" if name == "matmul" else "matmul")
             if shared and name in ("matmul", "bias_add") else "stage"} for name, value in us.items()]


def write_profile(run_dir) -> None:
    from asight_lsp.store.caches import store_profile
    from asight_lsp.store.runs import Run
    kernel = {"name": "main", "function": FN, "stages": {"tuned": {"source": "rdtsc"}, "baseline": {"source": "rdtsc"}},
              "blocks": {"baseline": _blocks({"matmul": 2400.0, "bias_add": 8.0, "relu": 1.2}, False),
                         "tuned": _blocks({"matmul": 30.0, "bias_add": 0.7, "relu": 5.46}, True)}}
    store_profile(Run(run_dir), {"key": {"test": True}, "profile": {"kernels": [kernel]}})


async def test_hover_and_hint_flag_a_block_that_got_slower(client, workspace, tuned):
    write_profile(workspace / ".asight" / "runs" / "mbr128")
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    lines = tuned.read_text().splitlines()
    relu = next(i for i, s in enumerate(lines) if 'T.sblock("relu")' in s)
    matmul = next(i for i, s in enumerate(lines) if 'T.sblock("matmul")' in s)
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=ident(uri), position=types.Position(line=relu + 2, character=16)))
    text = hover.contents.value
    assert "- latency: untuned 1.2 µs → tuned 5.5 µs, 4.5× slower" in text
    flag = next(line for line in text.splitlines() if "slower after tuning" in line)
    assert flag.startswith("- **⚠ slower after tuning: relu 1.2 µs → 5.5 µs, 4.5× slower; schedule: ")
    assert "parallel" in flag and "vectorize" in flag            # what mbr128's best trace did to relu
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=ident(uri), position=types.Position(line=matmul + 2, character=16)))
    assert "untuned 2.40 ms → tuned 30 µs, 80× faster" in hover.contents.value
    assert "slower after tuning" not in hover.contents.value
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=ident(uri), range=types.Range(start=types.Position(line=0, character=0),
                                                     end=types.Position(line=len(lines), character=0))))
    by_line = {h.position.line: h for h in hints}
    assert "⚠ 1.2 µs → 5.5 µs" in by_line[relu].label
    tooltip = by_line[relu].tooltip
    assert (tooltip if isinstance(tooltip, str) else tooltip.value).startswith("⚠ slower after tuning: relu")
    assert "2.40 ms → 30 µs" in by_line[matmul].label and "⚠" not in by_line[matmul].label
