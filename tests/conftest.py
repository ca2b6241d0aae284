"""Shared fixtures: paths and a real TVM worker (module-scoped, so TVM is imported once)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.fixture(scope="module")
def worker():
    from asight_lsp.engine.client import WorkerClient

    client = WorkerClient()
    yield client
    client.close()
