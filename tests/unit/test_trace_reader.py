"""read_records shares one parsed instruction list between records with the same instructions
(store/runs.TraceReader) and still reads every record as json.loads would."""
import json
from pathlib import Path

from asight_lsp.store.runs import DB_RECORDS, UNREADABLE, TraceReader, read_records

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "mbr128"


def test_records_equal_a_plain_parse_and_share_instruction_lists():
    lines = [ln for ln in (RUN / DB_RECORDS).read_text().splitlines() if ln.strip()]
    records = read_records(RUN)
    assert len(records) == len(lines) == 40
    for rec, line in zip(records, lines):
        row = json.loads(line)
        assert rec["insts"] == row[1][0][0] and rec["decisions"] == row[1][0][1]
        assert rec["run_secs"] == [float(s) for s in row[1][1]] and rec["target"] == row[1][2]
    distinct = {id(r["insts"]) for r in records}
    texts = {json.dumps(r["insts"]) for r in records}
    assert len(distinct) == len(texts) < len(records)     # one object per distinct instruction list


def test_odd_lines_fall_back_to_a_whole_parse_and_bad_ones_are_unreadable():
    reader = TraceReader()
    assert reader.loads('{"not": "a record"}') == {"not": "a record"}
    assert reader.loads('[0, [[[["A", [], [], []]], [[0, 1]]], [1e-05], {"kind": "llvm"}, []]]')[1][0][0] == [["A", [], [], []]]
    assert reader.loads('[0, [[[["A", [], [], []]], [[0, 2]]], [2e-05], {"kind": "llvm"}, []]]')[1][0][1] == [[0, 2]]
    assert reader.loads('[0, [[[["A", [], [') is UNREADABLE


def test_trial_numbers_skip_only_unreadable_lines(tmp_path):
    lines = [ln for ln in (RUN / DB_RECORDS).read_text().splitlines() if ln.strip()][:3]
    (tmp_path / DB_RECORDS).write_text(lines[0] + "\n{torn\n" + lines[1] + "\n\n" + lines[2] + "\n")
    assert [r["trial"] for r in read_records(tmp_path)] == [0, 1, 2]
