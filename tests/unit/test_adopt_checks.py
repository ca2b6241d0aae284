"""``asight adopt``'s checks that need no TVM (services/adopt.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from asight_lsp.errors import AsightError
from asight_lsp.services.adopt import require_prim_func
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.selection import select

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_a_relax_model_is_refused_with_what_adopt_takes():
    """Outside probe F9: "pick one PrimFunc of the unit ()"."""
    path = FIXTURES / "relax_cnn.py"
    outline = build_outline(path.read_text(), str(path))
    with pytest.raises(AsightError, match=r"relax_cnn.py: adopt takes a TIR function \(a PrimFunc\) tuned elsewhere; "
                                          r"Net.main is a Relax model: adopt does not take models"):
        require_prim_func(select(outline, None), str(path))
    tir = FIXTURES / "gpu" / "matmul1024.py"
    outline = build_outline(tir.read_text(), str(tir))
    require_prim_func(select(outline, None), str(tir))


def test_a_damaged_work_folder_is_refused_with_its_line_and_nothing_about_tuning_again(tmp_path):
    """Outside probe 3, F9: adopt said "TVM cannot load it … `asight tune --new` starts a fresh run" for a
    record TVM loads (run_secs 0) and a user who cannot tune here."""
    import json
    import shutil
    from asight_lsp.services.adopt import _check_folder
    from asight_lsp.store.runs import DB_RECORDS
    shutil.copytree(FIXTURES / "runs" / "mbr128", tmp_path / "w")
    assert _check_folder(tmp_path / "w") == (tmp_path / "w").resolve()
    rows = [json.loads(line) for line in (tmp_path / "w" / DB_RECORDS).read_text().splitlines()]
    rows[5][1][1], rows[7][1][1] = [0.0], [-1e-6]
    (tmp_path / "w" / DB_RECORDS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(AsightError) as err:
        _check_folder(tmp_path / "w")
    assert str(err.value) == (f"{tmp_path / 'w'}: the database cannot be adopted: {DB_RECORDS} line 6: run_secs must "
                              "be positive seconds, not 0.0 (and 1 more); nothing was copied")


@pytest.mark.parametrize("name", ["database_tuning_record.json", "counters.jsonl"])
def test_a_work_folder_file_that_is_a_link_or_a_fifo_is_named_not_missing_or_ignored(tmp_path, name):
    """Outside probe 4, F11: a records file linked to /dev/zero was "missing"; such a counters.jsonl was
    ignored without a word."""
    import os
    import shutil
    from asight_lsp.services.adopt import _check_folder, _counters
    shutil.copytree(FIXTURES / "runs" / "mbr128", tmp_path / "w")
    target = tmp_path / "w" / name
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    with pytest.raises(AsightError, match=rf"^{target} is not a regular file \(a link, a FIFO or a device\)"):
        _check_folder(tmp_path / "w")
        _counters(tmp_path / "w", None)
    target.unlink()
    target.symlink_to("/dev/zero")
    with pytest.raises(AsightError, match=rf"^{target} is not a regular file"):
        _check_folder(tmp_path / "w")
        _counters(tmp_path / "w", None)


def test_a_source_the_gate_refuses_says_adopt_not_tune_and_an_empty_records_file_says_so(tmp_path):
    """Probe 4, F13: adopt of a source with a non-literal constant said "refusing to tune 'Matmul1024'";
    counters of a folder whose records file is empty said "(the records file has lines 0..-1)"."""
    from asight_lsp.errors import InputError
    from asight_lsp.services.adopt import adopt, counter_candidates
    from asight_lsp.store.counters import parse_counters
    source = tmp_path / "m.py"
    source.write_text((FIXTURES / "gpu" / "matmul1024.py").read_text().replace(
        "\nN = 1024\n", '\nN = __import__("os").system("true") or 1024\n'))
    assert "__import__" in source.read_text()
    with pytest.raises(InputError, match=r"m.py:[0-9]+:[0-9]+: refusing to adopt 'Matmul1024'"):
        adopt(str(FIXTURES / "gpu"), str(source), worker=None, store_root=str(tmp_path / ".asight"))
    assert not (tmp_path / ".asight").exists()
    ghost = parse_counters('{"candidate": 76, "metrics": {"a": 1}}', "c.jsonl")
    with pytest.raises(AsightError, match=r"^c.jsonl:1: candidate 76 is not a record of this function \(the records "
                                          r"file is empty\)$"):
        counter_candidates(ghost, [], 0, "c.jsonl")


def test_counters_without_a_kernel_time_are_said_unchecked_at_adopt(tmp_path):
    """Outside probe 6, N5: without gpu__time_duration.sum, the check against the record's latency was
    skipped without a word, and another kernel's counters were shown as the candidate's."""
    import shutil
    from asight_lsp.services.adopt import _note_lacking
    from asight_lsp.store.runs import Run
    shutil.copytree(FIXTURES / "runs" / "mbr128", tmp_path / "r")
    run = Run(tmp_path / "r")
    meta = run.load()
    meta.extra["adopted"] = {"workload": 0}
    run.save(meta)
    timed = {"gpu__time_duration.sum": 1.0, "launch__registers_per_thread": 32}
    _note_lacking(run, [{"candidate": 1, "metrics": timed}, {"candidate": 2, "metrics": {"a": 1}},
                        {"candidate": 3, "metrics": {"a": 1}}, {"candidate": "baseline", "metrics": {"a": 1}}])
    said = run.load().extra["adopted"]["counters_lack"]
    assert said.endswith("; 2 counters lines without gpu__time_duration.sum: not checked against their records' "
                         "latencies (counters of another program would not be caught)")
