"""The core's list of target tags (``engine/target_tags.py``) is the installed TVM's."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_tags_are_what_the_installed_tvm_knows():
    spec = importlib.util.spec_from_file_location("make_target_tags", ROOT / "scripts" / "make_target_tags.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    assert maker.render() == (ROOT / "asight_lsp" / "engine" / "target_tags.py").read_text()
