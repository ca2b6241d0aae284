"""Shared fixtures: paths and a real TVM worker (module-scoped, so TVM is imported once)."""
from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest

# A test run started as a background job (`bash .ci/run &`) inherits SIGINT ignored, and so would every
# process the tests start: the Ctrl-C tests then wait for a cancel that never comes.  A handler here
# (not SIG_IGN) makes each child start with the default, as under a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))
# The harness's time budgets (docs/measurement.md), smaller for the suite: every tune re-measures its best
# candidates (0.6 s a program) and times untuned vs tuned (1.5 s); the same rounds, never below 5, on
# less time (a tuning test's 8-16 trials need no tighter interval).  The processes the tests start
# (tuning jobs, workers, servers, code-server) inherit them.
os.environ.setdefault("ASIGHT_MEASURE_BUDGET_S", "0.3")
os.environ.setdefault("ASIGHT_CANDIDATE_BUDGET_S", "0.15")
# The user's cache (worker/intrinsics.py keeps TVM's parsed tensor intrinsics there): one of the session's
# own, so that a run neither reads nor leaves anything in ~/.cache (its first GPU-target process fills it).
if "ASIGHT_CACHE_DIR" not in os.environ:
    SESSION_CACHE = os.environ["ASIGHT_CACHE_DIR"] = tempfile.mkdtemp(prefix="asight-cache-")
    os.chmod(SESSION_CACHE, 0o755)     # the red team's processes as ``nobody`` read it too
else:
    SESSION_CACHE = None
# The schedule library (store/library.py) off: a tuning test's trials are its own search's, whatever ran
# before it; the library's tests name a library of their own.
os.environ.setdefault("ASIGHT_LIBRARY", "off")


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def measured(base_us: float, tuned_us: float | None, rounds: int = 9, busy: bool = False, spread: float = 0.01,
             by: str = "test", scope: str = "function") -> dict:
    """A measurement record (analysis/measurement.py) of synthetic interleaved rounds around the
    given medians: what the harness would have produced."""
    from asight_lsp.analysis.measurement import comparison_record
    wobble = [1.0 + spread * ((r * 7) % 5 - 2) for r in range(rounds)]
    samples = {"untuned": [base_us * w for w in wobble]}
    if tuned_us is not None:
        samples["tuned"] = [tuned_us * w for w in reversed(wobble)]
    raw = {"samples_us": samples, "calls_per_repeat": {k: 2 for k in samples}, "rounds": rounds, "seconds": 1.0,
           "threads": 2, "method": "interleaved rounds",
           "load": {"other_cores": 0.9 if busy else 0.0, "steal": 0.0, "loadavg": [0.1, 0.1]}}
    return comparison_record(raw, ["untuned"], ["tuned"] if tuned_us is not None else [], by, scope, 0.0)


@pytest.fixture(scope="module")
def worker():
    from asight_lsp.engine.client import WorkerClient

    client = WorkerClient()
    yield client
    client.close()


@pytest.fixture(scope="session")
def cli_tuned_tiny_resnet(tmp_path_factory):
    """The tiny ResNet imported, tuned and profiled by the CLI once per session (tests/tuned_models.py);
    a module takes its own copy, at the same path, with ``.checkout()``."""
    from tests.tuned_models import Pristine, cli_tuned_tiny_resnet
    return Pristine(tmp_path_factory.mktemp("tiny-resnet-cli"), cli_tuned_tiny_resnet)


@pytest.fixture(scope="session")
def job_tuned_tiny_resnet(tmp_path_factory):
    """The tiny ResNet imported and tuned by a tuning job once per session (tests/tuned_models.py);
    a module takes its own copy, at the same path, with ``.checkout()``."""
    from tests.tuned_models import Pristine, job_tuned_tiny_resnet
    return Pristine(tmp_path_factory.mktemp("tiny-resnet-job"), job_tuned_tiny_resnet)


@pytest.fixture(scope="session")
def cli_tuned_matmul64(tmp_path_factory):
    """matmul64.py tuned by the CLI (16 trials, seed 0) once per session (tests/tuned_models.py); a module
    takes its own copy, at the same path, with ``.checkout()``; ``.made``: the command's JSON reply."""
    from tests.tuned_models import Pristine, cli_tuned_matmul64
    return Pristine(tmp_path_factory.mktemp("matmul64-cli"), cli_tuned_matmul64)


def _has_cuda() -> bool:
    """An NVIDIA GPU with a working driver (nvidia-smi lists one); TVM's CUDA runtime is checked by the tests."""
    import shutil
    import subprocess
    if not shutil.which("nvidia-smi"):
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` run only where a GPU is (docs/tuning.md, "GPU"); elsewhere they are skipped."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not _has_cuda():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA (nvidia-smi found none)")
        for item in gpu_items:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """The session's own cache goes with it."""
    import shutil
    if SESSION_CACHE:
        shutil.rmtree(SESSION_CACHE, ignore_errors=True)
