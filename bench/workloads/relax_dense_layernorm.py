"""A Relax block: dense (matmul + bias), residual add, layer norm, as a transformer layer ends."""
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class DenseNorm:
    @R.function
    def main(x: R.Tensor((32, 384), "float32"), w: R.Tensor((384, 384), "float32"),
             b: R.Tensor((384,), "float32"), gamma: R.Tensor((384,), "float32"),
             beta: R.Tensor((384,), "float32")) -> R.Tensor((32, 384), "float32"):
        with R.dataflow():
            h = R.matmul(x, w)
            hb = R.add(h, b)
            res = R.add(hb, x)
            out = R.nn.layer_norm(res, gamma, beta, axes=[-1])
            R.output(out)
        return out
