"""ASight demo: a 128x128 matmul followed by a bias add and a ReLU, as three TVMScript blocks.

Tune it with ``asight tune matmul_bias_relu.py`` (or ``asight demo``), then open it in the editor
to see which block the time goes to and what the best schedule did to each one.
"""
from tvm.script import ir as I
from tvm.script import tirx as T

N = 128


@I.ir_module
class MatmulBiasRelu:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((N, N), "float32"),
             B: T.Buffer((N, N), "float32"),
             bias: T.Buffer((N,), "float32"),
             D: T.Buffer((N, N), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        C = T.alloc_buffer((N, N), "float32")
        E = T.alloc_buffer((N, N), "float32")
        for i, j, k in T.grid(N, N, N):
            with T.sblock("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(N, N):
            with T.sblock("bias_add"):
                vi, vj = T.axis.remap("SS", [i, j])
                E[vi, vj] = C[vi, vj] + bias[vj]
        for i, j in T.grid(N, N):
            with T.sblock("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = T.max(E[vi, vj], T.float32(0))
