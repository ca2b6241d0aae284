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


def test_a_target_for_another_architecture_is_refused_before_a_job_starts():
    """Tuning times every program here: an aarch64 mtriple on an x86_64 machine is said up front
    (TVM's own failure named an unregistered NEON intrinsic after the job started)."""
    from asight_lsp.engine.targets import architecture, require_runs_here
    from asight_lsp.services.tuning import check_target
    assert architecture("aarch64-linux-gnu") == architecture("arm64") == "aarch64"
    assert architecture("x86_64-pc-linux-gnu") == architecture("AMD64") == "x86_64"
    require_runs_here("x86_64-unknown-linux-gnu", "x86_64")
    require_runs_here(None, "x86_64")
    require_runs_here("aarch64-linux-gnu", "aarch64")
    with pytest.raises(TargetError, match="makes aarch64 code, which this x86_64 machine cannot run"):
        require_runs_here("aarch64-linux-gnu", "x86_64")
    with pytest.raises(TargetError, match="asight adopt"):
        require_runs_here("riscv64-unknown-linux-gnu", "aarch64")
    import platform
    other = "aarch64-linux-gnu" if architecture(platform.machine()) != "aarch64" else "x86_64-linux-gnu"
    for text in (f"llvm -mtriple={other}", f'{{"kind": "llvm", "mtriple": "{other}"}}'):
        with pytest.raises(TargetError, match="cannot run"):
            check_target(text)


@pytest.mark.parametrize("text", ["llvm -cl-opt=-print-after-all:bool=true,-ir-dump-directory:string=/tmp/x",
                                  '{"kind": "llvm", "cl-opt": ["-info-output-file:string=/root/.bashrc"]}',
                                  '{"kind": "cuda", "host": {"kind": "llvm", "cl-opt": ["-time-passes:bool=true"]}}',
                                  '{"kind": "cuda", "host": "llvm -cl-opt=-x:bool=true"}'])
def test_options_for_llvm_itself_are_refused(text):
    """``-cl-opt`` hands any option to LLVM, and some write files where they say, from the unsandboxed
    builders (red team round 8: a repository's asight.target setting dumped IR into any folder)."""
    from asight_lsp.services.tuning import check_target
    with pytest.raises(TargetError, match="'cl-opt' is not supported"):
        target_config(text)
    with pytest.raises(TargetError, match="'cl-opt' is not supported"):
        check_target(text)


def test_a_ptx_build_that_fails_says_the_compilers_error_not_the_first_line_of_the_source():
    """Outside probe 5, N9: a V100 run's PTX level answered "#ifdef __CUDACC_RTC__" (TVM's message is the
    CUDA file, then the compiler's error)."""
    from asight_lsp.analysis.codelinks import ptx_failure
    message = "#ifdef __CUDACC_RTC__\n#endif\n__global__ void k() {}\n\nCompilation error:\n" \
              "nvcc fatal   : Unsupported gpu architecture 'sm_70'\n"
    assert ptx_failure(message, "sm_70", "nvcc") == (
        "the ptx level compiles the run's CUDA for sm_70 with nvcc here, which failed: nvcc fatal   : Unsupported "
        "gpu architecture 'sm_70' (CUDA 13's nvcc no longer compiles for sm_50-sm_72: use an nvcc of CUDA 12 or "
        "older for this run's PTX); the cuda level shows the kernels' source")
    other = ptx_failure(message.replace("sm_70", "sm_999"), "sm_999", "nvcc")
    assert "sm_999" in other and "CUDA 13" not in other and "#ifdef" not in other
