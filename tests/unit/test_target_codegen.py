"""Only LLVM writes host code (engine/targets.require_code_generator): TVM's C code generator prints a
function's global_symbol into C source, and a crafted name became a constructor that ran as root when
the library loaded (red team round 7)."""
from __future__ import annotations

import pytest

from asight_lsp.analysis.native_calls import SYMBOL, allowed, describe
from asight_lsp.engine.targets import TargetError, target_config


@pytest.mark.parametrize("text", ['{"kind": "llvm", "host": {"kind": "c"}}', "c", "llvm -host=c",
                                  '{"kind": "cuda", "host": "c"}', '{"kind": "c"}'])
def test_the_c_code_generator_is_refused(text):
    with pytest.raises(TargetError, match="not supported"):
        target_config(text)


def test_llvm_hosts_and_tags_pass():
    assert target_config("llvm -mcpu=znver3") == {"kind": "llvm", "mcpu": "znver3"}
    assert target_config('{"kind": "cuda", "host": {"kind": "llvm"}}')["host"] == {"kind": "llvm"}
    assert target_config("nvidia/nvidia-h100") == "nvidia/nvidia-h100"


def test_a_global_symbol_must_be_a_c_identifier():
    assert allowed(SYMBOL, "main") and allowed(SYMBOL, "fused_conv2d_add_relu1") and allowed(SYMBOL, "_k2")
    for name in ("\n#ifndef PWN\nint x;", "a b", "f(void)", "9lives", "", "k;system"):
        assert not allowed(SYMBOL, name), name
    text = describe(SYMBOL, "\n#ifndef PWN\n" + "x" * 200)
    assert "not a C identifier" in text and len(text) < 140
