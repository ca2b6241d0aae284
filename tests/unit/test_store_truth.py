"""The store never lies (docs/tuning.md): a torn last record line is reported and set aside, never
silently dropped; a damaged database is named as such before TVM meets it; an unreadable run.json
is refused, not replaced by a new run beside it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.owner import mark_own

from asight_lsp.errors import AsightError
from asight_lsp.store.database import database_health, records_note, require_intact
from asight_lsp.store.owner import mark_own
from asight_lsp.store.runs import DB_RECORDS, DB_WORKLOADS, DamagedDatabase, Run, RunMeta, RunStore, read_records

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
MBR = FIX / "runs" / "mbr128"


@pytest.fixture
def run(tmp_path) -> Run:
    """A copy of the recorded run mbr128 (40 records of one workload), as the user's own run."""
    shutil.copytree(MBR, tmp_path / "mbr128")
    mark_own(tmp_path / "mbr128")
    return Run(tmp_path / "mbr128")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_an_intact_database_is_healthy(run):
    health = database_health(run.path)
    assert (health.records, health.unreadable, health.workloads, health.damage) == (40, 0, 1, None)
    assert not health.needs_memory_copy and records_note(run) is None and run.repair_db() == 0


def test_a_torn_last_line_is_counted_set_aside_and_said(run):
    records = lines(run.records_path)
    torn = records[5][:len(records[5]) // 2]
    run.records_path.write_text("\n".join(records) + "\n" + torn)
    health = database_health(run.path)
    assert (health.records, health.unreadable, health.damage) == (40, 1, None) and health.needs_memory_copy
    assert len(read_records(run.path)) == 40
    assert records_note(run) == (f"the last line of {DB_RECORDS} is unreadable (a write cut short); "
                                 "the 40 readable records are kept")
    assert run.repair_db() == 1
    assert lines(run.records_path) == records                              # the measured lines untouched
    assert (run.path / f"{DB_RECORDS}.unreadable").read_text() == torn + "\n"   # nothing thrown away
    assert run.load().extra["set_aside_records"] == 1
    assert records_note(run) == (f"1 torn line of {DB_RECORDS} (a write cut short) set aside in "
                                 f"{DB_RECORDS}.unreadable; the 40 readable records are kept")


def test_a_unicode_escape_tvms_json_reader_refuses_is_damage_naming_its_line(run):
    """Outside probe 9, F5: an annotation key "café" written by Python's json.dumps as ``caf\\u00e9`` was
    accepted at adopt, and TVM's loader then refused it ("Unsupported escape sequence: \\u") in the code view."""
    records = lines(run.records_path)
    rows = [json.loads(line) for line in records]
    insts = rows[4][1][0][0]                         # [workload, [[instructions, decisions], run_secs, ...]]
    insts.insert(1, ["Annotate", ["b0", 1], ["café"], []])
    assert "caf\\u00e9" in json.dumps(rows[4])
    run.records_path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    health = database_health(run.path)
    assert health.problems == [f"{DB_RECORDS} line 5 has a \\uXXXX escape, which TVM's JSON reader cannot read"]
    assert health.damage.startswith(f"{DB_RECORDS} line 5 has a \\uXXXX escape")
    assert "TVM cannot load it" in health.damage
    insts[1][2] = ["caf\\u00e9"]                      # an escaped backslash and a letter u: TVM reads it
    run.records_path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert '"caf\\\\u00e9"' in run.records_path.read_text() and database_health(run.path).damage is None


def test_the_recorded_databases_hold_no_unicode_escape():
    from asight_lsp.store.files import first_unicode_escape
    files = [*FIX.glob("runs/*/database_*.json"), *FIX.glob("gpu/**/database_*.json")]
    assert files and all(first_unicode_escape(path.read_bytes()) is None for path in files)


def test_a_line_that_is_json_but_no_record_counts_as_torn(run):
    with run.records_path.open("a") as out:
        out.write("[0, 1]\n")
    assert database_health(run.path).unreadable == 1 and run.repair_db() == 1
    assert database_health(run.path).unreadable == 0


@pytest.mark.parametrize("damage, expected", [
    ("middle_record", f"{DB_RECORDS} line 4 of 40 is not a record"),
    ("truncated_workload", f"{DB_WORKLOADS} line 1 is not a readable workload"),
    ("garbled_workload", f"{DB_WORKLOADS} line 1 is not a readable workload"),
    ("empty_workloads", f"records name workload 0, but {DB_WORKLOADS} holds 0"),
    ("no_workloads", f"{DB_WORKLOADS} is missing"),
])
def test_a_damaged_database_is_refused_with_one_line_and_left_as_it_is(run, damage, expected):
    workloads = run.path / DB_WORKLOADS
    if damage == "middle_record":
        records = lines(run.records_path)
        records[3] = records[3][:50]
        run.records_path.write_text("\n".join(records) + "\n")
    elif damage == "truncated_workload":
        data = workloads.read_bytes()
        workloads.write_bytes(data[:len(data) // 2])
    elif damage == "garbled_workload":
        row = json.loads(workloads.read_text())
        row[1] = row[1][:200] + "AAAA" + row[1][204:]
        workloads.write_text(json.dumps(row) + "\n")
    elif damage == "empty_workloads":
        workloads.write_text("")
    else:
        workloads.unlink()
    before = {p.name: p.read_bytes() for p in run.path.iterdir()}
    health = database_health(run.path)
    assert health.damage.startswith(expected) and "TVM cannot load it" in health.damage
    with pytest.raises(DamagedDatabase) as err:
        require_intact(run.path)
    assert isinstance(err.value, AsightError) and "\n" not in str(err.value)
    assert str(err.value).startswith("damaged database in run mbr128: ") and "--new" in str(err.value)
    assert run.repair_db() == 0
    assert {p.name: p.read_bytes() for p in run.path.iterdir()} == before


def test_a_torn_workload_line_no_record_names_is_tolerated(run):
    workloads = run.path / DB_WORKLOADS
    good = workloads.read_text()
    workloads.write_text(good + good[:300])
    health = database_health(run.path)
    assert health.damage is None and health.torn_workload and health.needs_memory_copy
    run.repair_db()
    assert workloads.read_text() == good


# --------------------------------------------------------------------------- resume


def resumable_run(store: Path, source: Path, run_id: str) -> Run:
    """A finished run of ``source``'s only function that ``asight tune`` would resume."""
    from asight_lsp.services.tuning import host_label
    from asight_lsp.tvmscript.hashing import function_hash
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.tvmscript.selection import select
    text = source.read_text()
    outline = build_outline(text, str(source))
    selection = select(outline, None)
    run = RunStore(store).create(RunMeta(id=run_id, file=str(source.resolve()), function=selection.label,
                                         source_hashes={f.id: function_hash(text, f) for f in selection.functions},
                                         target_label=host_label(), state="done", trials_requested=40,
                                         trials_done=40, extra={"constants": outline.constants}))
    for name in (DB_RECORDS, DB_WORKLOADS):
        shutil.copy(MBR / name, run.path / name)
    return run


def asight(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_resuming_a_damaged_database_fails_at_once_and_touches_nothing(tmp_path):
    source = tmp_path / "matmul64.py"
    shutil.copy(FIX / "matmul64.py", source)
    run = resumable_run(tmp_path / ".asight", source, "matmul64-20260101-000000-0000")
    (run.path / DB_WORKLOADS).write_text('["123", "not base64 at all"]\n')
    before = {p.name: p.read_bytes() for p in run.path.iterdir()}
    proc = asight("tune", str(source), "--work-dir", str(tmp_path / ".asight"), "--trials", "48", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("asight: error: damaged database in run matmul64-20260101-000000-0000: "
                           f"{DB_WORKLOADS} line 1 is not a readable workload")
    assert {p.name: p.read_bytes() for p in run.path.iterdir()} == before      # no job, no new session
    assert [p.name for p in (tmp_path / ".asight" / "runs").iterdir()] == [run.id]


def test_an_unreadable_run_json_of_this_function_is_refused_not_replaced(tmp_path):
    source = tmp_path / "matmul64.py"
    shutil.copy(FIX / "matmul64.py", source)
    run = resumable_run(tmp_path / ".asight", source, "matmul64-20260101-000000-0000")
    run.meta_path.write_text('{"id": "matmul64-2026')                # torn
    proc = asight("tune", str(source), "--work-dir", str(tmp_path / ".asight"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "run matmul64-20260101-000000-0000: run.json is unreadable" in line
    assert "40 records measured" in line and "--new" in line
    assert [p.name for p in (tmp_path / ".asight" / "runs").iterdir()] == [run.id]   # no new run beside it
    assert run.meta_path.read_text() == '{"id": "matmul64-2026'


def test_an_unreadable_run_json_of_another_function_is_passed_over(tmp_path):
    store = RunStore(tmp_path)
    other = store.runs_dir / "softmax-20260101-000000-0000"
    other.mkdir(parents=True)
    (other / "run.json").write_text("{")
    assert store.find_resumable("/w/m.py", "matmul64", {}, "t") is None
    mine = store.runs_dir / "matmul64-20260101-000000-0001"
    mine.mkdir()
    (mine / "run.json").write_text("{")
    assert store.find_resumable("/w/m.py", "matmul64", {}, "t") is None      # shipped: not the user's to resume
    mark_own(mine)                                                          # the user's own, damaged
    with pytest.raises(AsightError, match="run.json is unreadable.*pass --new"):
        store.find_resumable("/w/m.py", "matmul64", {}, "t")
    assert store.run_id_prefix("Mod.main") == "Mod.main-" and store.new_run_id("Mod.main").startswith("Mod.main-")


def test_threads_of_one_process_save_run_json_at_once(run):
    """Two threads of the server (a job's watcher and a cancel) save one run.json at once: each
    write is whole and none fails (CI once failed when both used the same temporary name)."""
    from concurrent.futures import ThreadPoolExecutor
    meta = run.load()

    def save(k: int) -> None:
        for _ in range(200):
            meta.state = f"state-{k}"
            run.save(meta)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(save, range(8)))
    assert run.load().state.startswith("state-")
    assert not [p.name for p in run.path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("entry, target", [("source.py", "victim_rc"), ("run.json", "/dev/zero"),
                                           ("profiles", "victim_dir"), ("logs/task_0.log", "victim_rc"),
                                           ("database_tuning_record.json.unreadable", "victim_rc")])
def test_a_run_folder_with_a_link_is_not_used(run, tmp_path, entry, target):
    """A run folder is data a repository can ship: a symbolic link in it made the product write
    (source.py -> a shell rc), delete (profiles/ -> another folder) or read without end (run.json ->
    /dev/zero) where it pointed (red team round 8).  Such a run is refused whole, by name."""
    (tmp_path / "victim_rc").write_text("# rc\n")
    (tmp_path / "victim_dir").mkdir()
    where = run.path / entry
    where.parent.mkdir(exist_ok=True)
    if where.exists():
        where.unlink()
    where.symlink_to(target if target.startswith("/") else tmp_path / target)
    with pytest.raises(AsightError, match=f"{entry} is a symbolic link; a run folder holds plain files only"):
        run.load()
    assert RunStore(run.path.parent.parent).metas() == [] or all(m.id != run.id for m in RunStore(run.path.parent.parent).metas())
    assert (tmp_path / "victim_rc").read_text() == "# rc\n"


def test_a_fifo_or_a_linked_run_folder_is_not_used(run, tmp_path):
    os.mkfifo(run.path / "events.jsonl.fifo")
    with pytest.raises(AsightError, match="events.jsonl.fifo is not a plain file"):
        run.load()
    (run.path / "events.jsonl.fifo").unlink()
    linked = tmp_path / "linked"
    linked.symlink_to(run.path)
    with pytest.raises(AsightError, match="not a plain folder"):
        Run(linked).load()


def test_a_runs_id_is_its_folders_name(run):
    """The core builds paths from a run's id: run.json's "id" of "../../../outside" led it to open and
    repair a folder outside the store (red team round 8).  A copied run keeps working under its new name."""
    data = json.loads(run.meta_path.read_text())
    data["id"] = "../../../outside"
    run.meta_path.write_text(json.dumps(data))
    assert run.load().id == "mbr128"


@pytest.mark.parametrize("name", ["r1\n@__import__('os').system('x') or (lambda f: f)\n#", "r 1", ".hidden", "r1;x"])
def test_a_run_folder_named_as_no_run_is_refused(run, name):
    """A run's id is its folder's name, shown and written above an applied schedule: a name holding a
    newline put a decorator into the user's file (red team round 10)."""
    renamed = Run(run.path.rename(run.path.parent / name))
    with pytest.raises(AsightError, match="a name asight never gives a run"):
        renamed.load()


def test_an_atomic_write_gets_the_mode_a_plain_write_would(tmp_path):
    from asight_lsp.store.files import write_atomic
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    written = write_atomic(tmp_path / "atomic.txt", "x")
    assert written.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_hard_link_in_a_run_folder_is_not_used(run, tmp_path):
    """An archive can hold hard links: events.jsonl linked to a shell rc would be appended to."""
    victim = tmp_path / "victim_rc"
    victim.write_text("# rc\n")
    (run.path / "events.jsonl").unlink(missing_ok=True)
    os.link(victim, run.path / "events.jsonl")
    with pytest.raises(AsightError, match="events.jsonl is a hard link"):
        run.load()


def test_a_refused_run_is_never_read_through_its_links(run, tmp_path):
    """Red team round 9: the refusal's record count read database_tuning_record.json -> /dev/zero."""
    from asight_lsp.store.files import NotPlainFile, read_plain
    records = run.path / "database_tuning_record.json"
    records.unlink()
    records.symlink_to("/dev/zero")
    with pytest.raises(NotPlainFile, match="symbolic link"):
        read_plain(records)
    with pytest.raises(NotPlainFile, match="symbolic link"):
        read_records(run.path)
    store = RunStore(tmp_path / "store")
    meta = json.loads(run.meta_path.read_text())
    store.runs_dir.mkdir(parents=True)
    moved = store.runs_dir / f"{RunStore.run_id_prefix(meta['function'])}20261127-000000-aaaa"
    run.path.rename(moved)
    mark_own(moved)            # the user's own run (a shipped one is passed over: never resumed)
    with pytest.raises(AsightError, match="its records are not read"):
        store.find_resumable(meta["file"], meta["function"], meta["source_hashes"], meta["target_label"])
    with pytest.raises(NotPlainFile, match="not a regular file"):
        read_plain("/dev/zero")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(NotPlainFile, match="more than"):
        read_plain(big, limit=1024)


def test_a_linked_store_gets_no_new_run_and_a_nested_line_is_unreadable(run, tmp_path):
    """Red team round 9: .asight/runs shipped as a link made tune write a run (and the user's source)
    outside the workspace; a record line of 100,000 "[" raised RecursionError in every view."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "ws" / ".asight").mkdir(parents=True)
    (tmp_path / "ws" / ".asight" / "runs").symlink_to(elsewhere)
    meta = run.load()
    meta.id = "new-run"
    with pytest.raises(AsightError, match="is a symbolic link"):
        RunStore(tmp_path / "ws" / ".asight").create(meta)
    assert list(elsewhere.iterdir()) == []
    records = run.path / "database_tuning_record.json"
    before = len(read_records(run.path))
    with open(records, "a") as out:
        out.write("[" * 100_000 + "\n")
    assert len(read_records(run.path)) == before


def test_a_cache_over_its_limit_reads_as_missing(run):
    """Red team round 9: 20 MB of empty msgpack maps became 20 million dicts in the server."""
    from asight_lsp.store.caches import PROFILE_FILE, PROFILE_LIMIT, load_profile
    import msgpack
    n = PROFILE_LIMIT + 1       # {"profile": [{}, {}, ...]}: valid msgpack, one byte an object
    (run.path / PROFILE_FILE).write_bytes(b"\x81" + msgpack.packb("profile") + b"\xdd" + n.to_bytes(4, "big") + b"\x80" * n)
    assert load_profile(run) is None
    small = 1000                # {"profile": {"blocks": [{}, ...]}} under the limit is read
    (run.path / PROFILE_FILE).write_bytes(b"\x81" + msgpack.packb("profile") + b"\x81" + msgpack.packb("blocks")
                                          + b"\xdd" + small.to_bytes(4, "big") + b"\x80" * small)
    assert load_profile(run) == {"blocks": [{}] * small}
    # red team round 10: a profile that is not a profile's shape is no profile (not an AttributeError)
    for bad in ("x", [1], {"measured": "x"}, {"cache_key": [1]}):
        (run.path / PROFILE_FILE).write_bytes(msgpack.packb({"key": [1], "profile": bad}))
        assert load_profile(run) is None


def test_a_run_is_read_while_its_files_are_being_written(run, monkeypatch):
    """The folder check met a write's temporary file that was renamed away before it looked at it, and
    the server kept a stale run (the e2e lens after a Re-measure, CI 2026-11-27)."""
    import asight_lsp.store.runs as runs_module
    real_walk = os.walk

    def walk_with_a_vanished_file(path):
        for folder, dirs, files in real_walk(path):
            yield folder, dirs, files + [".profile.msgpack.k2j4.tmp"]     # listed, then renamed away
    monkeypatch.setattr(runs_module.os, "walk", walk_with_a_vanished_file)
    assert run.load().id == "mbr128"


def test_a_linked_store_shows_no_run_and_is_refused_by_name(run, tmp_path):
    """Red team round 10: `.asight` -> elsewhere made every view read runs from there and write its caches there."""
    from asight_lsp.store.index import RunIndex
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "runs").mkdir(parents=True)
    shutil.copytree(run.path, elsewhere / "runs" / "r1")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".asight").symlink_to(elsewhere)
    with pytest.raises(AsightError, match="is a symbolic link"):
        RunStore(str(tmp_path / "ws" / ".asight")).get("r1")
    assert RunIndex(tmp_path / "ws" / ".asight").metas() == []
    assert [m.id for m in RunIndex(elsewhere).metas()] == ["r1"]        # the same store, named as itself


@pytest.mark.parametrize("text, why", [("[" * 3000 + "]" * 3000, "unreadable"),        # RecursionError
                                       ("[" + "[]," * 100_001 + "[]]", "lists and objects"),   # 5.6 MB of Python
                                       ("1", "not an object")])
def test_a_hostile_run_json_is_one_unreadable_run_not_a_broken_index(run, tmp_path, text, why):
    """Red team round 10: a deeply nested run.json took every lens of the file down with a traceback;
    files of empty lists under the byte limit took the server to gigabytes."""
    from asight_lsp.store.index import RunIndex
    store = tmp_path / "store" / "runs"
    shutil.copytree(run.path, store / "good")
    shutil.copytree(run.path, store / "bad")
    data = json.loads((store / "bad" / "run.json").read_text())
    (store / "bad" / "run.json").write_text(text if why == "not an object" else
                                            json.dumps(data)[:-1] + f', "pad": {text}}}')
    with pytest.raises(AsightError, match=why):
        Run(store / "bad").load()
    assert [m.id for m in RunIndex(tmp_path / "store").metas()] == ["good"]


def test_a_runs_source_is_read_only_when_a_bounded_regular_file(run, tmp_path):
    """Red team round 10: "Compare runs" read run.json's "file": "/dev/zero" without end."""
    from asight_lsp.services.run_data import source_text
    meta = run.load()
    for file in ("/dev/zero", str(tmp_path)):
        meta.file = file
        assert source_text(meta, run.path) is None
    meta.file = str(FIX / "matmul_bias_relu.py")
    assert "MatmulBiasRelu" in source_text(meta, run.path)


def test_blank_lines_are_skipped_without_a_list_of_every_line(run):
    """Red team round 10: 128 MiB of newlines after the records became 134 million list entries (~1 GB)
    in the server's index; lines are now found one at a time by a C scan."""
    import tracemalloc
    from asight_lsp.store.files import file_lines
    from asight_lsp.store.index import _Records
    assert list(file_lines(b"a\n\n  \r\nb c\r\n\n")) == [b"a", b"b c\r"]
    before = read_records(run.path)
    with open(run.path / DB_RECORDS, "ab") as out:
        out.write(b"\n" * (16 << 20))
    tracemalloc.start()
    after = read_records(run.path)
    index = _Records(run.path / DB_RECORDS)
    index.update()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [r["trial"] for r in after] == [r["trial"] for r in before] and len(after) == 40
    assert index.count == 40 and index.offset == (run.path / DB_RECORDS).stat().st_size
    assert peak < 80 << 20          # the 16 MiB file and its records; a list of 16 million lines alone was ~130 MB


@pytest.mark.parametrize("secs, shown", [([-1e-6], "-1e-06"), ([0.0], "0.0"), ([float("nan")], "nan"),
                                         (["fast"], "'fast'"),
                                         ([1e-4, 1e10, 1e-4], "[0.0001, 10000000000.0, 0.0001], which mixes "
                                                              "MetaSchedule's failure mark")])   # probe 5, N5
def test_a_record_whose_run_secs_are_not_positive_seconds_is_damage_and_never_the_best(run, secs, shown):
    """Outside probe 2, F1: a negative latency became "best -1.0 µs"; NaN made TVM refuse the database."""
    lines = (run.path / DB_RECORDS).read_text().splitlines()
    row = json.loads(lines[5])
    row[1][1] = secs
    lines[5] = json.dumps(row)
    (run.path / DB_RECORDS).write_text("\n".join(lines) + "\n")
    assert database_health(run.path).damage.startswith(
        f"{DB_RECORDS} line 6: run_secs must be positive seconds, not {shown}")
    assert read_records(run.path)[5]["latency_us"] is None


def test_an_unreadable_run_is_named_for_its_function_by_the_names_it_holds_else_by_its_id(tmp_path):
    """The editor and the CLI name a function's run whose run.json cannot be read instead of saying "no
    run" (``RunIndex.unreadable_for``, the catalogue's ``require_view``)."""
    from asight_lsp.services.catalogue import Catalogue, Current
    store = RunStore(tmp_path)
    named = store.runs_dir / "x-20260101-000000-0000"      # names its file and function, one field bad
    named.mkdir(parents=True)
    (named / "run.json").write_text(json.dumps({"file": "/w/m.py", "function": "M.main", "target": 42}))
    torn = store.runs_dir / "M.main-20260101-000000-0001"   # no JSON: its id says whose it is
    torn.mkdir()
    (torn / "run.json").write_text("{")
    os.utime(named / "run.json", (1_000_000, 1_000_000))
    index = Catalogue.of_store(tmp_path).index
    assert [rid for rid, *_ in index.unreadable_for("/w/m.py", {"M.main", "M"})] == [named.name, torn.name]
    assert [rid for rid, *_ in index.unreadable_for("/w/other.py", {"M.main"})] == [torn.name]
    assert index.unreadable_for("/w/m.py", {"M.small"}) == []
    assert [whose for *_, whose in index.unreadable_for("/w/m.py", {"M.main"})] == [
        "it is this function's run (its run.json names this file and function)",
        "it may be this function's run (its id begins as this function's runs do)"]
    with pytest.raises(AsightError, match=f"run {torn.name}: run.json is unreadable.*it may be this function's run"):
        Catalogue.of_store(tmp_path).require_view("/w/m.py", {"M.main"}, Current(), "M.main")
    shutil.rmtree(named)
    index.invalidate()
    assert [rid for rid, *_ in index.unreadable_for("/w/m.py", {"M.main"})] == [torn.name]


def test_an_unreadable_run_written_after_the_functions_readable_run_is_refused_not_passed_over(tmp_path):
    """With the newer run.json unreadable, the CLI does not show the older run as the function's latest
    (``asight code`` did while ``space`` and ``loops`` refused on the newer one); the editor shows the older
    one and names the newer beside it."""
    from asight_lsp.services.catalogue import Catalogue, Current
    source = tmp_path / "matmul64.py"
    shutil.copy(FIX / "matmul64.py", source)
    older = resumable_run(tmp_path / ".asight", source, "matmul64-20260101-000000-0000")
    newer = older.path.parent / "matmul64-20260102-000000-0000"
    newer.mkdir()
    (newer / "run.json").write_text(json.dumps({"file": str(source), "function": "matmul64", "target": 42}))
    os.utime(older.meta_path, (1_000_000, 1_000_000))
    catalogue = Catalogue.of_store(tmp_path / ".asight")
    with pytest.raises(AsightError, match=r"run matmul64-20260102-000000-0000: run.json is unreadable .* \(run "
                                          r"matmul64-20260101-000000-0000, written before it, can be read: pass --run"):
        catalogue.require_view(str(source), {"matmul64"}, Current(), "matmul64")
    view = catalogue.view(str(source), {"matmul64"}, Current())
    assert view.meta.id == older.id and view.newer_unreadable[0] == newer.name
    os.utime(newer / "run.json", (500_000, 500_000))          # the unreadable one is the older: the other is shown
    catalogue = Catalogue.of_store(tmp_path / ".asight")
    assert catalogue.require_view(str(source), {"matmul64"}, Current(), "matmul64").meta.id == older.id


def test_a_run_json_that_is_a_directory_is_one_unreadable_run(tmp_path):
    """Outside probe 14, F2: "internal error: IsADirectoryError" in every default view, and every lens of
    the workspace gone; it is one unreadable run like any other."""
    from asight_lsp.store.index import RunIndex
    run_dir = tmp_path / "runs" / "m-20260101-000000-0000"
    (run_dir / "run.json").mkdir(parents=True)
    with pytest.raises(AsightError, match=r"^run m-20260101-000000-0000: run.json is unreadable \(Is a directory\)$"):
        Run(run_dir).load()
    index = RunIndex(tmp_path, min_interval=0)
    assert index.metas() == [] and index.problems() == ["not shown: run m-20260101-000000-0000: run.json is unreadable "
                                                        "(Is a directory)"]


def test_a_run_folder_whose_run_json_was_deleted_is_named_not_skipped(tmp_path):
    """A run folder with its records but no run.json is named, not skipped by every view."""
    from asight_lsp.services.catalogue import Catalogue, Current
    from asight_lsp.store.index import RunIndex
    headless = tmp_path / "runs" / "M.main-20260101-000000-0000"
    headless.mkdir(parents=True)
    (headless / DB_RECORDS).write_text("")
    with pytest.raises(AsightError, match=r"^run M.main-20260101-000000-0000 has no run.json .* it may be this "
                                          r"function's run"):
        Catalogue.of_store(tmp_path).require_view("/w/m.py", {"M.main"}, Current(), "M.main")
    [(run_id, why, _)] = RunIndex(tmp_path, min_interval=0).unreadable_for("/w/m.py", {"M.main", "M"})
    assert run_id == headless.name and why == f"run {headless.name} has no run.json (its records are there)"


def test_the_newest_run_unreadable_says_how_to_view_another(tmp_path):
    """Outside probe 14, F5: space, loops and report refused on it without the way out that code gives."""
    from asight_lsp.services.run_data import load_run
    run_dir = tmp_path / "runs" / "m-20260101-000000-0000"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{")
    with pytest.raises(AsightError, match=r"run.json is unreadable .*; it is the newest run: view another with --run R"):
        load_run("latest", str(tmp_path), extract=False)


def test_the_newest_run_folder_without_run_json_is_not_passed_over_for_an_older_run(tmp_path):
    """Outside probe 15, F1: with the newer run's run.json deleted (or a broken link), space and loops
    showed the older run without a word; alone, it was "no run 'latest'"."""
    from asight_lsp.services.run_data import load_run
    older = tmp_path / "runs" / "m-20260101-000000-0000"
    older.mkdir(parents=True)
    (older / "run.json").write_text("{}")
    os.utime(older / "run.json", (1_000_000, 1_000_000))
    newer = tmp_path / "runs" / "m-20260102-000000-0000"
    newer.mkdir()
    (newer / DB_RECORDS).write_text("")
    (newer / "run.json").symlink_to(newer / "gone.json")
    said = r"^run m-20260102-000000-0000 has no run.json \(its records are there\); it is the newest run: view another"
    with pytest.raises(AsightError, match=said):
        load_run("latest", str(tmp_path), extract=False)
    shutil.rmtree(older)                      # alone: named, not "no run 'latest'"
    with pytest.raises(AsightError, match=said):
        load_run("latest", str(tmp_path), extract=False)
