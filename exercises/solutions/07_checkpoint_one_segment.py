"""Exercise 7, the reference (after lesson 7): checkpoint one segment (minigrad/checkpoint/segment.py does the same for any
function, any arguments, several outputs and bit-identical sums; NOTE [checkpoint] there)."""
import minigrad as mg
from minigrad.ops import Op
from minigrad.tensor import apply, enable_grad, keep_saved, recomputing

EXPLAIN = "b"  # the forward keeps x alone, but backward holds the insides again while it recomputes them


class MyCheckpoint(Op):
    """The one record that stands for module(x): its inputs are x and the module's parameters."""
    name = "my_checkpoint"

    def forward(self, x, *params, out, module):
        self.module, self.n_params = module, len(params)
        self.save_for_backward(x)  # x only: the parameters are alive anyway, the insides are recomputed
        return out

    def flops(self, inputs, out):
        return {}  # the segment's own ops counted their FLOPs as they ran

    def backward_flops(self, grad, input_grads):
        return {}  # and the recompute's ops count theirs

    def backward(self, g):
        (x,) = self.saved
        x_again = mg.tensor(x, requires_grad=True)  # a fresh leaf: the recompute's graph ends here
        with enable_grad(), recomputing():
            y = self.module(x_again)
        y.backward(g)  # the parameters get their .grad here, directly
        return (x_again.grad.data,) + (None,) * self.n_params


def my_checkpoint(module, x):
    with keep_saved(False):  # the segment's records are made, but keep nothing
        y = module(x)
    return apply(MyCheckpoint, x, *module.parameters(), out=y.data, module=module)
