"""Tuning job processes (TVM-free): a handle to follow, cancel and reap one job.

A job is ``python -m asight_lsp.worker.tune_job RUN_DIR`` in its own process group (its builder
and runner workers included), so cancel = one signal to the group.  ``TuneJob`` follows a job's
``events.jsonl``; ``refresh_run`` marks a run whose process vanished (SIGKILL, segfault) as failed,
keeping every record measured so far.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from ..engine.client import worker_env
from ..engine.spawn import NEUTRAL_CWD, module_argv
from ..store.database import database_health
from ..store.owner import is_own, require_own
from ..store.runs import Run, RunMeta, read_records
from ..tvmscript.outline import build_outline


CANCEL_GRACE_S = 1.5


LIVE_STATES = ("queued", "running")


def pid_alive(pid: int | None) -> bool:
    """Is ``pid`` a live (not zombie) tuning job process?"""
    if not pid:
        return False
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return any("tune_job" in part for part in proc.cmdline())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def runs_job_of(pid: int | None, run_dir) -> bool:
    """Is ``pid`` the tuning job of ``run_dir`` (``python -m asight_lsp.worker.tune_job RUN_DIR``)?  A
    run.json's pid is data a cloned repository can ship: nothing is signalled on its word alone."""
    if not pid:
        return False
    try:
        import psutil
        args = psutil.Process(pid).cmdline()
    except Exception:  # noqa: BLE001  gone, not ours to read, or no psutil: not provably the job
        return False
    wanted = os.path.realpath(str(run_dir))
    return any("tune_job" in part for part in args) and any(os.path.realpath(part) == wanted for part in args)


def refresh_run(run: Run, state="failed", reason: str | None = None, known_dead: bool = False) -> RunMeta:
    """The run's metadata, first marking a run whose job is gone (SIGKILL, segfault) as ``state``
    (a string, or a callable asked once the job is found gone: a cancel may have begun meanwhile).

    Called by the watcher when the job exits and by any later reader; the records measured so
    far stay as they are (``runs.read_records`` tolerates a torn last line; run.json counts it in
    ``extra.unreadable_records``).
    """
    meta = run.load()
    if meta.state not in LIVE_STATES:
        return meta
    if not known_dead:
        if pid_alive(meta.pid):
            return meta
        queued_at = meta.sessions[-1].get("started", meta.created) if meta.sessions else meta.created
        if meta.state == "queued" and meta.pid is None and time.time() - queued_at < 30:
            return meta  # spawned a moment ago; the job has not written its pid yet
    state = state() if callable(state) else state
    records = read_records(run.path)
    unreadable = database_health(run.path).unreadable
    if unreadable:
        meta.extra["unreadable_records"] = unreadable   # a torn last line: said, not hidden (docs/tuning.md)
    meta.state = state
    meta.error = reason or (None if state == "cancelled" else
                            f"the tuning job (pid {meta.pid}) ended without finishing (killed or crashed)")
    meta.finished = time.time()
    meta.trials_done = len(records)
    if meta.kind == "tir" and len(meta.tasks) <= 1:
        valid = [r["latency_us"] for r in records if r["latency_us"] is not None]
        meta.best_us = min(valid) if valid else meta.best_us
    if meta.sessions:
        meta.sessions[-1].update({"finished": meta.finished, "state": state, "trials_done": meta.trials_done})
    if not is_own(run.path):       # a shipped run that says it is tuning: shown ended, never written
        return meta
    run.save(meta)
    run.append_event({"type": "finished", "state": state, "best_us": meta.best_us, "baseline_us": meta.baseline_us,
                      "trials_done": meta.trials_done, "error": meta.error, "time": meta.finished})
    return meta


def kill_group(pgid: int | None, sig: int = signal.SIGKILL) -> None:
    """Signal a job's process group (its builder/runner workers too); a gone group is fine."""
    if not pgid:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return []
    import psutil
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return members


def end_group(pgid: int | None, timeout: float = 2.0) -> None:
    """SIGKILL what is left of a job's group and wait (briefly) until it is really gone."""
    if not pgid:
        return
    deadline = time.monotonic() + timeout
    kill_group(pgid)
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
        kill_group(pgid)


class TuneJob:
    """Handle on a running (or finished) tuning job."""

    def __init__(self, run: Run, proc: subprocess.Popen | None = None, events_from: int | None = None):
        self.run = run
        self._proc = proc
        self._offset = file_size(run.events_path) if events_from is None else events_from
        self._partial = b""
        self._ended = threading.Event()
        self._reaped = threading.Lock()
        self._cancelling = False
        pid = proc.pid if proc else run.load().pid
        self.pid = pid
        self._own = proc is not None   # signals go only to a job this handle started or proved is the run's
        threading.Thread(target=self._watch, daemon=True, name=f"tune-watch-{run.id}").start()

    @classmethod
    def attach(cls, run: Run, events_from: int = 0) -> "TuneJob":
        """A handle on a job started elsewhere (e.g. before the language server restarted)."""
        return cls(run, None, events_from)

    # -- watching
    def _watch(self) -> None:
        if self._proc is not None:
            self._proc.wait()
        else:   # attached: poll until the run is no longer live (refresh_run judges a missing pid)
            while True:
                meta = refresh_run(self.run, lambda: "cancelled" if self._cancelling else "failed")
                self.pid = meta.pid or self.pid
                if meta.state not in LIVE_STATES:
                    break
                time.sleep(0.2)
        self._reap()

    def _reap(self) -> None:
        """After the job process ended: kill stray workers, fix the state if the job could not."""
        with self._reaped:
            if self._ended.is_set():
                return
            if self.pid and self._own:
                end_group(self.pid)
            code = self._proc.returncode if self._proc is not None else None
            if self._cancelling:
                refresh_run(self.run, "cancelled", known_dead=True)
            else:
                how = (f"killed by signal {-code}" if code is not None and code < 0 else
                       f"exit code {code}" if code is not None else "process gone")
                refresh_run(self.run, "failed", f"the tuning job ended without finishing ({how})", known_dead=True)
            self._ended.set()

    @property
    def done(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout: float | None = None) -> RunMeta:
        """Block until the job ended (or ``timeout`` s passed: then the current, live metadata)."""
        self._ended.wait(timeout)
        return self.run.load()

    def cancel(self) -> None:
        """Stop the job: SIGTERM (the job records ``cancelled`` and kills its group), SIGKILL after ~1.5 s."""
        if self.done:
            return
        self._cancelling = True
        self.pid = self.pid or self.run.load().pid
        self._own = self._own or runs_job_of(self.pid, self.run.path)
        if not self.pid or not self._own:    # not started, or its pid is not this run's job: record the cancel
            refresh_run(self.run, "cancelled", known_dead=True)
            self._ended.wait(2)
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if not self._ended.wait(CANCEL_GRACE_S):
            kill_group(self.pid)
            if self._proc is None:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._ended.wait(5)

    # -- events
    def poll_events(self) -> list[dict]:
        """New events since the last call (complete lines of events.jsonl only); never blocks."""
        try:
            with self.run.events_path.open("rb") as stream:
                stream.seek(self._offset)
                chunk = stream.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        events = []
        for line in lines:
            if line.strip():
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return events


def cancel_run(run: Run, timeout: float = 10.0) -> RunMeta:
    """Stop the job of a run started elsewhere (``asight tune --cancel RUN``, a detached job): SIGTERM,
    SIGKILL of its group after ``CANCEL_GRACE_S``.  A run that is not tuning comes back with
    ``extra["cancel"] = "not running"`` (not saved)."""
    require_own(run.path, "cancelling its job")
    meta = refresh_run(run)
    if meta.state not in LIVE_STATES:
        meta.extra["cancel"] = "not running"
        return meta
    job = TuneJob.attach(run, events_from=file_size(run.events_path))
    job.cancel()
    return job.wait(timeout)


def failure_message(run: Run, meta: RunMeta) -> str | None:
    """The run's error, with a TVM parse problem placed where the user must fix it.

    TVM reports well-formedness errors at 1:1; ``diagnostics.problem_to_diagnostic`` finds the
    statement (the same placement ``asight check`` and the editor use).
    """
    problem = meta.extra.get("problem")
    if not problem or not run.source_path.exists():
        return meta.error
    from ..tvmscript.diagnostics import problem_to_diagnostic
    from ..tvmscript.pysource import source_lines
    text = run.source_path.read_text(encoding="utf-8")
    outline = build_outline(text, meta.file)
    unit = next((u for u in outline.units if u.name == problem.get("unit")), None)
    diag = problem_to_diagnostic(problem, unit, source_lines(text))
    start = diag["range"]["start"]
    return f"{meta.file}:{start['line'] + 1}:{start['character'] + 1}: {diag['message']}"


def spawn(run: Run) -> subprocess.Popen:
    """Start the job process (own session = own process group); the job records its pid itself."""
    log = (run.path / "job.log").open("ab")
    try:
        proc = subprocess.Popen(module_argv("asight_lsp.worker.tune_job", str(run.path.resolve())),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=worker_env(), start_new_session=True, cwd=NEUTRAL_CWD)
    finally:
        log.close()
    return proc


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
