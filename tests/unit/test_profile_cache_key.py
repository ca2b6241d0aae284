"""A kept profile is reused only for what it measured: the function's source, the module constants it
uses and the weights beside the file, as the catalogue compares them (services/profiling._cache_key)."""
from __future__ import annotations

import numpy as np

from asight_lsp.services.catalogue import Current
from asight_lsp.services.profiling import ProfileOptions, _cache_key, _same_state
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.selection import select

TEXT = '''from tvm.script import tirx as T
N = 32


@T.prim_func(s_tir=True)
def mm(A: T.Buffer((N, N), "float32"), C: T.Buffer((N, N), "float32")):
    for i, j in T.grid(N, N):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * T.float32(2)
'''


def key_of(text: str, path: str) -> dict:
    outline = build_outline(text, path)
    selection = select(outline, None)
    current = Current.of_text(text, selection.functions, path, outline.constants)
    return _cache_key(current, path, selection, None, ProfileOptions(), None)


def test_a_constant_the_function_uses_or_the_weights_beside_it_make_another_profile(tmp_path):
    path = str(tmp_path / "mm_relax.py")
    kept = key_of(TEXT, path)
    assert _same_state(kept, key_of(TEXT, path))
    assert not _same_state(kept, key_of(TEXT.replace("N = 32", "N = 16"), path))      # the function's text is the same
    assert _same_state(kept, key_of(TEXT.replace("N = 32", "N = 32\nM = 7"), path))   # a constant it does not use
    np.savez(tmp_path / "mm_relax.weights.npz", w=np.zeros(3, "float32"))
    with_weights = key_of(TEXT, path)
    assert not _same_state(kept, with_weights)
    np.savez(tmp_path / "mm_relax.weights.npz", w=np.ones(3, "float32"))
    assert not _same_state(with_weights, key_of(TEXT, path))


def test_a_profile_kept_before_the_key_had_constants_and_weights_is_compared_by_source_and_records(tmp_path):
    path = str(tmp_path / "mm.py")
    old = {k: v for k, v in key_of(TEXT, path).items() if k not in ("constants", "weights")}
    assert _same_state(old, key_of(TEXT, path))
    assert not _same_state(old, key_of(TEXT.replace("* T.float32(2)", "* T.float32(3)"), path))
