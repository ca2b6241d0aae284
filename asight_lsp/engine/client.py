"""Client side of the long-lived TVM worker process (the core never imports TVM itself).

The worker is ``python -m asight_lsp.worker`` talking msgpack frames (``framing``) on its stdin and
stdout.  One request runs at a time.  If the worker dies or hangs, the request in flight gets a
``WorkerCrashed`` / ``WorkerTimeout`` with the tail of the worker's stderr, and the next request
starts a fresh worker.

The worker runs inside its OS sandbox (docs/sandbox.md) and says so in its first frame
(``{"id": 0, "hello": {"pid", "sandbox"}}``), kept here as ``sandbox``.  ``WorkerClient(sandbox=False)``
starts a worker without it, for a trusted request that needs files and processes (cachegrind).
"""
from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Callable

from ..errors import WorkerCrashed, WorkerError, WorkerTimeout
from . import wire
from .framing import FrameError, read_frame, write_frame
from .spawn import NEUTRAL_CWD, isolated_env, module_argv
_EOF = object()
PARENT_ENV = "ASIGHT_WORKER_PARENT"   # the worker dies with this process (PR_SET_PDEATHSIG, worker/__main__.py)


def _spawner_loop(jobs: queue.Queue) -> None:
    while True:
        make, reply = jobs.get()
        try:
            reply.put((True, make()))
        except BaseException as err:   # noqa: BLE001 -- handed back to the caller's thread
            reply.put((False, err))


_SPAWN_JOBS: queue.Queue = queue.Queue()
_SPAWNER: threading.Thread | None = None
_SPAWNER_LOCK = threading.Lock()


def spawn_from_long_lived_thread(make: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """Run ``make`` (a Popen) on one thread that lives as long as this process: the worker's
    parent-death signal fires when the *thread* that started it ends, and a request may come from a
    short-lived thread."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None or not _SPAWNER.is_alive():
            _SPAWNER = threading.Thread(target=_spawner_loop, args=(_SPAWN_JOBS,), name="asight-spawner", daemon=True)
            _SPAWNER.start()
    reply: queue.Queue = queue.Queue(maxsize=1)
    _SPAWN_JOBS.put((make, reply))
    ok, value = reply.get()
    if not ok:
        raise value
    return value


def worker_env(base: dict | None = None) -> dict:
    """Environment for TVM processes: all cores for TVM's thread pool (docs/tvm.md §0), no user
    ``PYTHON*`` variable (``spawn.isolated_env``)."""
    env = isolated_env(base)
    env.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                          else os.cpu_count() or 1))
    return env


class WorkerClient:
    """Starts the TVM worker on first use and restarts it after a crash."""

    def __init__(self, python: str | None = None, default_timeout: float = 120.0, sandbox: bool = True):
        self.python = python or sys.executable
        self.default_timeout = default_timeout
        self.sandboxed = sandbox
        self.sandbox: dict | None = None   # the worker's report: {active, mechanism, reason, requested}
        self.restarts = 0
        self._proc: subprocess.Popen | None = None
        self._frames: queue.Queue = queue.Queue()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._lock = threading.Lock()
        self._next_id = 0
        _CLIENTS.add(self)

    # -- process management
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.poll() is None else None

    def _start(self) -> None:
        self._frames = queue.Queue()
        self._stderr_tail.clear()
        self.sandbox = None
        argv = module_argv("asight_lsp.worker", *([] if self.sandboxed else ["--unsandboxed"]), python=self.python)
        env = {**worker_env(), PARENT_ENV: str(os.getpid())}
        self._proc = spawn_from_long_lived_thread(lambda: subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=NEUTRAL_CWD,
            start_new_session=True))
        threading.Thread(target=self._read_frames, args=(self._proc, self._frames), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(self._proc,), daemon=True).start()

    def _read_frames(self, proc: subprocess.Popen, frames: queue.Queue) -> None:
        """The first frame is the worker's hello (its sandbox, reported before any user text is read);
        a later "hello" is not believed: code TVM evaluated can write frames to the pipe too."""
        try:
            first = read_frame(proc.stdout)
            if first.get("id") == 0 and "hello" in first:
                self.sandbox = (first["hello"] or {}).get("sandbox")
            else:
                frames.put(first)
            while True:
                frames.put(read_frame(proc.stdout))
        except (FrameError, OSError, ValueError, Exception):
            frames.put(_EOF)

    def _read_stderr(self, proc: subprocess.Popen) -> None:
        for raw in iter(proc.stderr.readline, b""):
            self._stderr_tail.append(raw.decode("utf-8", errors="replace").rstrip())

    def _ensure_started(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                self.restarts += 1
                remove_private_cwd(self.sandbox)     # the dead worker's folder; the new one makes its own
            self._start()

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        remove_private_cwd(self.sandbox)

    def close(self) -> None:
        """Ask the worker to exit, then make sure it did."""
        if self._proc and self._proc.poll() is None:
            try:
                write_frame(self._proc.stdin, {"id": -1, "method": wire.SHUTDOWN, "params": {}})
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                pass
        self.kill()

    # -- requests
    def request(self, method: str, params: dict | None = None, timeout: float | None = None,
                on_event: Callable[[dict], None] | None = None) -> Any:
        """Send one request and wait for its reply; events before the reply go to ``on_event``."""
        with self._lock:
            self._ensure_started()
            self._next_id += 1
            rid = self._next_id
            try:
                write_frame(self._proc.stdin, {"id": rid, "method": method, "params": params or {}})
            except (BrokenPipeError, OSError, ValueError):
                raise self._crashed(method) from None
            deadline = time.monotonic() + (timeout or self.default_timeout)
            while True:
                remaining = deadline - time.monotonic()
                try:
                    frame = self._frames.get(timeout=max(remaining, 0.0))
                except queue.Empty:
                    self.kill()
                    raise WorkerTimeout(f"the TVM worker did not answer '{method}' within "
                                        f"{timeout or self.default_timeout:.0f} s; it was restarted") from None
                if frame is _EOF:
                    raise self._crashed(method)
                if frame.get("id") != rid:
                    continue
                if "event" in frame:
                    if on_event:
                        on_event(frame["event"])
                    continue
                if "error" in frame:
                    err = frame["error"]
                    raise WorkerError(err.get("message", "unknown worker error"), err.get("type", "WorkerError"))
                return frame.get("result")

    def _crashed(self, method: str) -> WorkerCrashed:
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._proc = None
        remove_private_cwd(self.sandbox)
        self.restarts += 1
        time.sleep(0.05)  # let the stderr reader catch the last lines
        tail = " | ".join(line for line in list(self._stderr_tail)[-3:] if line)
        how = f"exit code {code}" if code is not None else "no exit code"
        message = f"the TVM worker died while handling '{method}' ({how}); it will be restarted"
        if code == -signal.SIGXCPU:
            message = (f"the file needs more than {wire.cpu_budget_s(method)} CPU-seconds for '{method}' (the "
                       f"worker's limit; set {wire.cpu_budget_env(method)} to change it); the worker will be restarted")
        return WorkerCrashed(message + (f": {tail}" if tail else ""))

    def __enter__(self) -> "WorkerClient":
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is not None and issubclass(kind, (KeyboardInterrupt, SystemExit)):
            self.kill()   # Ctrl-C: the worker may be deep in an evaluation and read no shutdown frame
        else:
            self.close()


_CLIENTS: "weakref.WeakSet[WorkerClient]" = weakref.WeakSet()


def remove_worker_folders() -> None:
    """The working folders of this process's workers, for a process about to be killed with them (a
    cancelled tune: its runner's worker left its folder in /tmp at every cancel)."""
    for client in list(_CLIENTS):
        remove_private_cwd(client.sandbox)


def remove_private_cwd(status: dict | None) -> None:
    """The sandboxed worker's empty working directory (it cannot remove it itself)."""
    path = ((status or {}).get("layers") or {}).get("cwd")
    if isinstance(path, str) and os.path.dirname(path) == tempfile.gettempdir() \
            and os.path.basename(path).startswith("asight-worker-"):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def sandbox_warning(status: dict | None) -> str | None:
    """One line for the user when a worker that should be sandboxed is not (None: all is well or unknown)."""
    if not status or status.get("active") or not status.get("requested", True):
        return None
    return (f"the TVM worker runs without its OS sandbox: {status.get('reason')}; "
            "files are checked statically only, TVM evaluates nothing (docs/sandbox.md)")


@contextlib.contextmanager
def trusted(python: str | None = None, default_timeout: float = 120.0):
    """A worker WITHOUT the OS sandbox, for one trusted request the user asked for explicitly
    (``asight profile --cachegrind``: valgrind is a process, the kernel library a file); closed after."""
    with WorkerClient(python, default_timeout, sandbox=False) as client:
        yield client


@contextlib.contextmanager
def borrowed(worker: "WorkerClient | None"):
    """The caller's WorkerClient, or a fresh one that is closed afterwards."""
    if worker is not None:
        yield worker
        return
    with WorkerClient() as client:
        yield client
