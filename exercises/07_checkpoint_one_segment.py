"""Exercise 7 (after lesson 7): checkpoint one segment: keep its input, drop its insides, recompute them in backward.

A plain run of y = module(x) keeps, until backward, every array its ops save: each Linear keeps its
input, each Tanh its output. A checkpoint keeps only x. In backward it runs the segment again, this
time keeping what its ops save, backpropagates the incoming gradient through that fresh graph and
lets it go. The same ops on the same numbers give the same gradients, bit for bit; the price is one
more forward of the segment, which mg.profile counts as 'recompute'.

One record stands for the whole segment on the tape: a MyCheckpoint, made by `apply` as any op's
record is. `apply(OpClass, *tensors, **attrs)` (minigrad/tensor/tensor.py) runs OpClass().forward on
the tensors' raw arrays, passing attrs through as keywords, and returns a Tensor whose grad_fn is that
op, with one edge per tensor input. Its edges decide what backward reaches: give it x AND the module's
parameters, so that its output requires grad, and backward reaches the record, even when x itself
needs no gradient.

The switches you have (minigrad/tensor/modes.py, each a context manager):

    no_grad()           ops run without making records: nothing is on the tape afterwards
    keep_saved(False)   ops make their records, but the records keep none of the arrays their ops saved
    enable_grad()       recording on again, inside a no_grad block
    recomputing()       marks a checkpoint's recompute: mg.profile counts its FLOPs as 'recompute', and
                        BatchNorm does not update its running statistics a second time

Choose with care for the forward: the check looks at the tape your forward leaves, not only at bytes.

The three pieces, with their contracts:

1. my_checkpoint(module, x): runs module on x (a Tensor) keeping nothing of its insides, and returns a
   Tensor equal to module(x) whose record is a MyCheckpoint.
2. MyCheckpoint.forward(self, x, *params, out, module): x and params are NumPy arrays; out is the
   segment's output array, already computed. It keeps on self what backward will need, saves x (and
   only x: that is the whole point) through save_for_backward, and returns out. It computes nothing;
   its FLOPs are given as {}.
3. MyCheckpoint.backward(self, g): g is the gradient at the output. It returns one gradient per input
   of the record, in order: x's, then one per parameter. The parameters can get their .grad directly
   from a backward you run inside this one; then what must this return for them, so that nothing is
   added twice?

Shapes in the check: x (8, 16), a float64 MLP 16 -> 32 -> 32 -> 16 with Tanh between, y (8, 16).
Graded: one MyCheckpoint record for the output, and records made by the segment's ops in the forward;
x's and every parameter's gradient equal the plain run's exactly (np.array_equal); after the forward
the activations (mg.profile's peak_bytes('activations')) are x's bytes, no more; backward recomputes
the segment exactly once.

Explain (graded: set EXPLAIN, below, to 'a', 'b' or 'c'). A step checkpoints its whole model as this
one segment, and nothing else. Against the plain step, its peak of activation bytes is
    (a) lower, by the bytes of the segment's insides
    (b) about the same
    (c) twice as high
Which, and why?

Grade it:  python -m minigrad check 7        (stuck? python -m minigrad check 7 --hint)
"""
import minigrad as mg  # noqa: F401  (everything your three pieces need is imported here)
from minigrad.ops import Op
from minigrad.tensor import apply, enable_grad, keep_saved, no_grad, recomputing  # noqa: F401

EXPLAIN = None  # your answer to the question at the end of the docstring


class MyCheckpoint(Op):
    """The one record that stands for module(x): its inputs are x and the module's parameters."""
    name = "my_checkpoint"

    def forward(self, x, *params, out, module):
        raise NotImplementedError("Exercise 7 (MyCheckpoint.forward): not written yet")

    def flops(self, inputs, out):
        return {}  # the segment's own ops counted their FLOPs as they ran

    def backward_flops(self, grad, input_grads):
        return {}  # and the recompute's ops count theirs

    def backward(self, g):
        raise NotImplementedError("Exercise 7 (MyCheckpoint.backward): the recompute and its backward are not "
                                  "written yet")


def my_checkpoint(module, x):
    raise NotImplementedError("Exercise 7 (my_checkpoint): the forward that keeps only x is not written yet")
