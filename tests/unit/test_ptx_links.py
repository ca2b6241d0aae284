"""PTX instructions linked to TVMScript lines through the CUDA C lines their ``.loc`` names
(analysis/codelinks.ptx_links), on the shape nvcc -lineinfo writes: ``.file`` at the end."""
from __future__ import annotations

from asight_lsp.analysis.codelinks import ptx_links

PTX = """\
.version 9.0
.target sm_90a
.visible .entry main_kernel(
\t.param .u64 main_kernel_param_0
)
{
\t.loc\t1 3 0
\tmov.f32 \t%f1, 0f00000000;
\t.loc\t1 5 3
$L__BB0_1:
\tld.shared.f32 \t%f2, [%r1];
\t// a comment
\tfma.rn.ftz.f32 \t%f1, %f2, %f2, %f1;
\t.loc\t2 5 3
\tadd.s32 \t%r1, %r1, 4;
\t.loc\t1 9 1
\tret;
}
\t.file\t1 "/tmp/x/tvm_kernels.cu"
\t.file\t2 "/usr/local/cuda/include/cuda_fp16.hpp"
"""
CUDA = [{"line": 2, "sourceLine": 15}, {"line": 4, "sourceLine": 17}]   # 0-based CUDA lines 3 and 5


def test_instructions_under_a_linked_cuda_line_link_to_its_tir_line():
    links = ptx_links(PTX, CUDA)
    lines = PTX.splitlines()
    got = [(lines[link["line"]].strip().split()[0], link["sourceLine"], link["cudaLine"]) for link in links]
    assert got == [("mov.f32", 15, 2), ("ld.shared.f32", 17, 4), ("fma.rn.ftz.f32", 17, 4)]


def test_other_files_unlinked_cuda_lines_and_directives_get_no_link():
    lines = PTX.splitlines()
    linked = {lines[link["line"]].strip().split()[0] for link in ptx_links(PTX, CUDA)}
    assert "add.s32" not in linked     # .loc of the header file (2), not the kernel source
    assert "ret;" not in linked        # CUDA line 9 has no TIR link
    assert ptx_links(PTX, []) == [] and ptx_links("", CUDA) == []
