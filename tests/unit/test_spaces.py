"""Design spaces written by the user: static recognition, which PrimFunc, jobs validation (no TVM)."""
from __future__ import annotations

import textwrap

import pytest

from asight_lsp.tvmscript.diagnostics import check_text
from asight_lsp.errors import AsightError
from asight_lsp.services.tuning import TuneRequest, start_tune
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.design_spaces import find_spaces, function_for_space, space_hash

from pathlib import Path

TEXT = (Path(__file__).resolve().parents[2] / "fixtures" / "matmul_space.py").read_text()


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


def test_recognises_space_function_and_sites():
    spaces = find_spaces(TEXT, "matmul_space.py")
    assert [s.name for s in spaces] == ["schedule_matmul"]
    space = spaces[0]
    assert space.param == "sch" and space.blocks == ["C"]
    assert space.line == _line(TEXT, "def schedule_matmul")
    assert space.name_range["start"] == {"line": space.line, "character": 4}
    sites = space.sites
    assert [s.method for s in sites] == ["sample_perfect_tile"] * 3 + ["sample_categorical"]
    assert [s.kind for s in sites] == ["SamplePerfectTile"] * 3 + ["SampleCategorical"]
    assert [(s.target, s.block, s.loop_index) for s in sites[:3]] == [("i", "C", 0), ("j", "C", 1), ("k", "C", 2)]
    assert sites[0].line == _line(TEXT, "i_tiles = sch.sample_perfect_tile")
    assert sites[0].results == ["i_tiles"] and sites[3].results == ["unroll"]
    assert sites[0].label() == "sample_perfect_tile(i (loop 0 of block C))"


def test_plain_defs_and_prim_funcs_are_not_spaces():
    text = textwrap.dedent('''\
        from tvm.script import tirx as T

        def helper(x):
            return x.sample_perfect_tile(1)      # any first parameter name counts

        def not_a_space(sch):
            sch.split(sch.get_loops(sch.get_sblock("C"))[0], factors=[2, None])

        def no_args():
            pass
        ''')
    names = [s.name for s in find_spaces(text)]
    assert names == ["helper"]   # recognition is by shape: first parameter . sample_*
    assert find_spaces(TEXT.replace("sch.sample_", "sch.other_")) == []


def test_sites_in_loops_compute_location_and_half_typed_file():
    text = textwrap.dedent('''\
        def space(s):
            b = s.get_sblock(name="B")
            loc = s.sample_compute_location(b)
            for loop in s.get_loops(s.get_sblock("C")):
                s.sample_perfect_tile(loop=loop, n=2)

        def broken(:
        ''')
    [space] = find_spaces(text)
    loc, tile = space.sites
    assert (loc.method, loc.block, loc.target, loc.in_loop) == ("sample_compute_location", "B", "b", False)
    assert (tile.target, tile.in_loop) == ("loop", True)
    assert space.blocks == ["B", "C"]


def test_function_for_space():
    outline = build_outline(TEXT, "x.py")
    space = find_spaces(TEXT, "x.py", outline)[0]
    assert function_for_space(outline, space) == "matmul64"
    two = TEXT + textwrap.dedent('''

        @T.prim_func
        def other(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.sblock("D"):
                    A[i] = T.float32(0)
        ''')
    outline = build_outline(two, "x.py")
    space = find_spaces(two, "x.py", outline)[0]
    assert function_for_space(outline, space) == "matmul64"      # only matmul64 has block C
    space.blocks = ["Z"]
    assert function_for_space(outline, space) is None


def test_file_with_imports_and_space_checks_clean():
    """A real user file: import tvm, meta_schedule, a prim_func and a schedule function: no diagnostics."""
    result = check_text(TEXT, "matmul_space.py", worker=None)
    assert result.diagnostics == [], result.diagnostics
    assert [u.name for u in result.outline.units] == ["matmul64"] and not result.outline.units[0].problems


def test_start_tune_refuses_bad_space_requests(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(TEXT)
    with pytest.raises(AsightError, match="no design space function 'nope'.*found: schedule_matmul"):
        start_tune(TuneRequest(file=str(src), space="nope", store_root=str(tmp_path / ".asight")))
    with pytest.raises(AsightError, match="--space-mode must be one of alone, union"):
        start_tune(TuneRequest(file=str(src), space="schedule_matmul", space_mode="both",
                               store_root=str(tmp_path / ".asight")))
    src.write_text(TEXT.replace('sch.get_sblock("C")', 'sch.get_sblock(name_of_block)') + textwrap.dedent('''

        @T.prim_func
        def other(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.sblock("D"):
                    A[i] = T.float32(0)
        '''))
    with pytest.raises(AsightError, match="cannot tell which PrimFunc 'schedule_matmul'.*--func.*matmul64, other"):
        start_tune(TuneRequest(file=str(src), space="schedule_matmul", store_root=str(tmp_path / ".asight")))
    assert not (tmp_path / ".asight" / "runs").exists() or not any((tmp_path / ".asight" / "runs").iterdir())


def test_space_key_follows_what_the_job_executes():
    """Resume/staleness key: the function and its context (constants, imports, helpers), not the
    TVMScript (hashed per function elsewhere) nor formatting or comments."""
    def key(text):
        return space_hash(text, find_spaces(text)[0])
    base = key(TEXT)
    assert key(TEXT.replace("UNROLL_STEPS = [0, 16, 64]", "UNROLL_STEPS = [0, 16, 64, 512]")) != base
    assert key(TEXT.replace("max_innermost_factor=8)", "max_innermost_factor=4)")) != base
    assert key(TEXT.replace("UNROLL_STEPS = [0, 16, 64]", "UNROLL_STEPS = [0,16,64]  # tried")) == base
    assert key(TEXT.replace("T.float32(0)", "T.float32(0.0)")) == base   # the PrimFunc is keyed on its own
