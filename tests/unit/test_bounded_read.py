"""Reading a source file is bounded (found by an outside red team): a symlink to /dev/zero was read
until the machine ran out of memory, a FIFO blocked `asight check` for good, and a 3 GB sparse file
was read whole before the size limit applied."""
from __future__ import annotations

import os
import time

import pytest

from asight_lsp.commands.common import read_source
from asight_lsp.errors import AsightError
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.pysource import MAX_FILE_BYTES


@pytest.mark.parametrize("make", ["zero", "fifo"])
def test_a_device_or_fifo_is_refused_at_once(tmp_path, make):
    path = tmp_path / "k.py"
    if make == "zero":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    started = time.perf_counter()
    with pytest.raises(AsightError, match="is not a regular file"):
        read_source(str(path))
    assert time.perf_counter() - started < 5


def test_a_huge_sparse_file_is_read_only_up_to_the_limit(tmp_path):
    path = tmp_path / "big.py"
    with open(path, "wb") as handle:
        handle.truncate(3 * 1024 ** 3)                    # 3 GB, no blocks on disk
    data = read_source(str(path))
    assert len(data) == MAX_FILE_BYTES + 1
    assert "too large" in build_outline(data.decode("latin-1")).syntax_errors[0]["message"]
