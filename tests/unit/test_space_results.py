"""Which run speaks for a design space in the editor, its lines after edits, and resume keys (no TVM)."""
from __future__ import annotations

import json
from pathlib import Path

from asight_lsp.store.runs import DB_RECORDS, RunMeta, RunStore
from asight_lsp.store.index import RunIndex
from asight_lsp.server.state import DocState, document_spaces, space_result_of
from asight_lsp.tvmscript.design_spaces import find_spaces, site_at, space_hash

TEXT = (Path(__file__).resolve().parents[2] / "fixtures" / "matmul_space.py").read_text()
SPACE = find_spaces(TEXT)[0]
TILE_LINE = SPACE.sites[0].line
KINDS = ["GetSBlock", "GetLoops", "SamplePerfectTile"]
MAPPING = {"kinds": KINDS, "instructions": [{"index": 2, "ordinal": 0, "kind": "SamplePerfectTile", "line": TILE_LINE}]}


def _record(tile, secs):
    insts = [[k, [], [], []] for k in KINDS] + [["EnterPostproc", [], [], []]]
    return [0, [[insts, [[2, tile]]], [secs], {"kind": "llvm"}, []]]


def _store(tmp_path: Path, file: Path, space_hash_value: str, records: list) -> RunStore:
    store = RunStore(tmp_path / ".asight")
    meta = RunMeta(id="r1", file=str(file), function="matmul64", state="done", trials_done=len(records), best_us=5.0,
                   extra={"space": {"function": "schedule_matmul", "mode": "alone", "hash": space_hash_value,
                                    "line": SPACE.line, "mapping": MAPPING}})
    run = store.create(meta)
    (run.path / DB_RECORDS).write_text("".join(json.dumps(r) + "\n" for r in records))
    return store


def _doc(path: Path, text: str) -> DocState:
    return DocState(uri=path.as_uri(), path=str(path), text=text)


def test_result_moves_with_the_function_and_goes_stale_when_it_changes(tmp_path):
    file = tmp_path / "m.py"
    store = _store(tmp_path, file, space_hash(TEXT, SPACE), [_record([8, 8], 20e-6), _record([16, 4], 5e-6)])
    index = RunIndex(store.root)
    doc = _doc(file, TEXT)
    [space] = document_spaces(doc)
    result = space_result_of(index, doc, space)
    assert result.meta.id == "r1" and not result.stale
    assert result.by_line[TILE_LINE].best == [(16, 4)]
    # three lines inserted above: same function text, hints move with it
    moved = "# a\n# b\n# c\n" + TEXT
    doc = _doc(file, moved)
    [space] = document_spaces(doc)
    assert list(space_result_of(index, doc, space).by_line) == [TILE_LINE + 3]
    assert site_at([space], TILE_LINE + 3, 20)[1].method == "sample_perfect_tile"
    assert site_at([space], TILE_LINE + 2, 0) is None
    # the function itself changed: stale, no statistics
    changed = TEXT.replace("max_innermost_factor=16)\n    j_tiles", "max_innermost_factor=32)\n    j_tiles")
    doc = _doc(file, changed)
    [space] = document_spaces(doc)
    result = space_result_of(index, doc, space)
    assert result.stale and result.by_line == {}


def test_stats_follow_new_records_and_files_without_spaces_are_not_parsed(tmp_path):
    file = tmp_path / "m.py"
    store = _store(tmp_path, file, space_hash(TEXT, SPACE), [_record([8, 8], 20e-6)])
    index = RunIndex(store.root)
    doc = _doc(file, TEXT)
    [space] = document_spaces(doc)
    assert space_result_of(index, doc, space).by_line[TILE_LINE].best == [(8, 8)]
    with (store.runs_dir / "r1" / DB_RECORDS).open("a") as out:
        out.write(json.dumps(_record([2, 32], 1e-6)) + "\n")
    assert space_result_of(index, doc, space).by_line[TILE_LINE].best == [(2, 32)]
    assert document_spaces(_doc(file, "def f(sch):\n    sch.split(1)\n")) == []


def test_resume_keys_keep_space_runs_and_plain_runs_apart(tmp_path):
    store = RunStore(tmp_path / ".asight")
    plain = RunMeta(id="plain", file="/w/m.py", function="matmul64", source_hashes={"matmul64": "h"}, target_label="t")
    spaced = RunMeta(id="spaced", file="/w/m.py", function="matmul64", source_hashes={"matmul64": "h"}, target_label="t",
                     extra={"space": {"function": "f", "mode": "alone", "hash": "s"}})
    store.create(plain)
    store.create(spaced)
    assert store.find_resumable("/w/m.py", "matmul64", {"matmul64": "h"}, "t").id == "plain"
    assert store.find_resumable("/w/m.py", "matmul64", {"matmul64": "h"}, "t", ("f", "alone", "s")).id == "spaced"
    assert store.find_resumable("/w/m.py", "matmul64", {"matmul64": "h"}, "t", ("f", "union", "s")) is None
    assert store.find_resumable("/w/m.py", "matmul64", {"matmul64": "h"}, "t", ("f", "alone", "other")) is None
