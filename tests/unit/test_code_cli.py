"""``asight code``: bad input gives one line on stderr and exit 2 (no TVM needed: refused before the worker)."""
from __future__ import annotations

from pathlib import Path

import pytest

from asight_lsp.cli import main

ROOT = Path(__file__).resolve().parents[2]
SOURCE = str(ROOT / "fixtures" / "matmul_bias_relu.py")
RUN = str(ROOT / "fixtures" / "runs" / "mbr128")


@pytest.mark.parametrize("argv, message", [
    (["--run", "nosuchrun"], "no run 'nosuchrun'"),
    (["--run", RUN, "--candidate", "99"], "has no candidate 99 (it has 40: 0..39)"),
    (["--run", RUN, "--candidate", "-1"], "--candidate must be a trial index >= 0"),
    (["--candidate", "2"], "--candidate needs a run"),
    (["--diff", "3"], "--diff needs --run R"),
    (["--run", RUN, "--diff", "3", "--level", "asm"], "--diff compares scheduled code"),
    (["--run", RUN, "--func", "nope"], "no function 'nope'"),
    (["--run", RUN, "--task", "nope"], "no task 'nope' in this run (tasks: "),   # ignored (outside probe 12, F7)
])
def test_bad_input_is_one_line(argv, message, capsys, tmp_path):
    code = main(["code", SOURCE, "--work-dir", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_bad_level_and_missing_file(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["code", SOURCE, "--level", "sass"])
    assert exit_info.value.code == 2 and "invalid choice: 'sass'" in capsys.readouterr().err
    assert main(["code", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_run_of_another_function(capsys, tmp_path):
    other = tmp_path / "other.py"
    other.write_text((ROOT / "fixtures" / "matmul64.py").read_text())
    assert main(["code", str(other), "--run", RUN, "--work-dir", str(tmp_path)]) == 2
    assert "tuned MatmulBiasRelu.main" in capsys.readouterr().err


def test_a_diff_with_a_failed_candidate_says_that_side_failed():
    """Outside probe 2, F8: `code --diff` against a trial that failed where it was tuned read like any other."""
    from asight_lsp.commands.code import render_diff
    from asight_lsp.services.codeview import diff_payload
    side = lambda trial, us: {"run": "R", "candidate": {"trial": trial, "latencyUs": us}, "text": f"x = {trial}\n",  # noqa: E731
                              "trace": "", "decisions": {}}
    diff = diff_payload("m.py", "M.main", [side(76, 134.6), side(0, None)])
    assert [s["label"] for s in diff["sides"]] == ["R trial 76", "R trial 0 (failed where it was tuned: no latency)"]
    text = render_diff(diff).splitlines()
    assert text[:2] == ["# M.main: R trial 76 vs R trial 0 (failed where it was tuned: no latency)",
                        "latency: 134.6 µs -> none (one side has no measured latency)"]
    assert "failed" not in render_diff(diff_payload("m.py", "M.main", [side(76, 134.6), side(3, 140.0)]))


def test_the_code_of_a_trial_that_failed_where_it_was_tuned_says_so_at_the_top():
    """Outside probe 6, N7: `asight code --candidate 0` (run_secs 1e10 on the H100) headed its kernel
    "(R, trial 0)"; the failure was in the note after the last line only."""
    from asight_lsp.commands.code import render
    view = lambda us: {"level": "cuda", "function": "M.main", "run": "R", "text": "k\n", "links": [],  # noqa: E731
                       "candidate": {"trial": 0, "latencyUs": us}}
    assert render(view(None)).splitlines()[0] == "# cuda code of M.main (R, trial 0: failed where it was tuned, no latency)"
    assert render(view(134.6)).splitlines()[0] == "# cuda code of M.main (R, trial 0, 134.6 µs)"


def test_the_default_run_passes_over_a_newer_run_refused_before_measuring(tmp_path):
    """Probe 4, F6: after a refused `tune --target vulkan` beside an adopted run, `asight code` (newest run of
    the function) showed the failed run ("this run's target is vulkan"); it takes the rule of `latest` now."""
    import json
    import os
    import shutil
    import time

    from asight_lsp.services.lookup import latest_run
    from asight_lsp.store.runs import RunMeta, RunStore
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.tvmscript.selection import select

    store = RunStore(tmp_path / ".asight")
    shutil.copytree(RUN, store.runs_dir / "mbr128")
    meta = json.loads((store.runs_dir / "mbr128" / "run.json").read_text())
    (store.runs_dir / "mbr128" / "run.json").write_text(json.dumps({**meta, "file": SOURCE}))
    selection = select(build_outline(Path(SOURCE).read_text(), SOURCE), None)
    failed = store.create(RunMeta(id="MatmulBiasRelu-failed", file=SOURCE, function=selection.unit.name,
                                  state="failed", error="no vulkan device on this machine; measure on one with --rpc"))
    later = time.time() + 5
    os.utime(failed.meta_path, (later, later))
    assert store.get("latest").id == "mbr128"
    assert latest_run(store, SOURCE, selection).id == "mbr128"
    shutil.rmtree(store.runs_dir / "mbr128")   # when every run was refused, the newest is still the answer
    assert latest_run(store, SOURCE, selection).id == failed.id


class _TraceFails:
    """A worker whose replay of the run's trace fails as TVM's does when a block it gets is gone."""
    python = None

    def request(self, method, params, timeout=None):
        from asight_lsp.errors import WorkerError
        raise WorkerError("ScheduleError: An error occurred in the schedule primitive 'get-block'.", "ScheduleError")


def test_a_renamed_block_says_the_function_changed_since_the_run_not_tvms_schedule_error(tmp_path):
    """Probe 4, F9: after `T.sblock("C")` became "D", the code view (CLI and LSP) answered TVM's raw
    "ScheduleError: An error occurred in the schedule primitive 'get-block'."."""
    import json
    import shutil

    from asight_lsp.errors import AsightError, WorkerError
    from asight_lsp.services.codeview import code_view
    from asight_lsp.tvmscript.hashing import function_hash
    from asight_lsp.tvmscript.outline import build_outline

    store = tmp_path / ".asight"
    shutil.copytree(RUN, store / "runs" / "mbr128")
    source = tmp_path / "m.py"
    source.write_text(Path(SOURCE).read_text().replace('sblock("matmul")', 'sblock("mm")'))
    meta = json.loads((store / "runs" / "mbr128" / "run.json").read_text())
    outline = build_outline(Path(SOURCE).read_text(), SOURCE)
    hashes = {fn.id: function_hash(Path(SOURCE).read_text(), fn) for fn in outline.functions}
    (store / "runs" / "mbr128" / "run.json").write_text(json.dumps({**meta, "file": str(source), "source_hashes": hashes}))
    for level in ("scheduled", "cuda"):
        with pytest.raises(AsightError, match=r"^the function changed since run mbr128 \(block matmul is no longer in "
                                              r"it\): its records no longer apply to it; re-tune it, or view the run's "
                                              r"own source \(asight code .*mbr128/source.py --run mbr128\)$"):
            code_view(str(source), store_root=str(store), worker=_TraceFails(), check=False, level=level)
    source.write_text(Path(SOURCE).read_text())     # not stale: the worker's error is not reworded
    with pytest.raises(WorkerError, match="^ScheduleError"):
        code_view(str(source), store_root=str(store), worker=_TraceFails(), check=False)
    # the run made for the renamed source (adopt matches by structure, which ignores block names): no
    # edit to blame, the records' block named (outside probe 11, F1)
    renamed = Path(SOURCE).read_text().replace('sblock("matmul")', 'sblock("mm")')
    source.write_text(renamed)
    hashes = {fn.id: function_hash(renamed, fn) for fn in build_outline(renamed, str(source)).functions}
    (store / "runs" / "mbr128" / "run.json").write_text(json.dumps({**meta, "file": str(source), "source_hashes": hashes}))
    with pytest.raises(AsightError, match=r"^the records of run mbr128 get block matmul, which this function does not "
                                          r"have \(the same computation with its blocks named otherwise"):
        code_view(str(source), store_root=str(store), worker=_TraceFails(), check=False)


def test_a_candidate_of_a_run_with_an_empty_records_file_says_it_is_empty(capsys, tmp_path):
    """Probe 4, F13: "has no candidate 76 (it has 0: 0..-1)"."""
    import shutil
    shutil.copytree(RUN, tmp_path / "r")
    (tmp_path / "r" / "database_tuning_record.json").write_text("")
    assert main(["code", SOURCE, "--work-dir", str(tmp_path), "--run", str(tmp_path / "r"), "--candidate", "76"]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("has no candidate 76 (its records file is empty)") and "0..-1" not in err, err
