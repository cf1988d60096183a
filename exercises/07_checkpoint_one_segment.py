"""Exercise 7: checkpoint one segment: keep its input, drop its insides, recompute them in backward.

A plain run of y = module(x) keeps, until backward, every array its ops save: each Linear keeps its
input, each Tanh its output. Checkpointing keeps only x. In backward it runs module(x) again, this
time keeping what the ops save, backpropagates the incoming gradient through that fresh graph and
frees it. The activations of the segment shrink to x's bytes; the price is one more forward of the
segment (mg.profile counts those FLOPs as 'recompute'). The same ops on the same numbers give the
same gradients, bit for bit.

You write three pieces (minigrad's own mg.checkpoint, in minigrad/checkpoint/segment.py, is the full version):

1. my_checkpoint(module, x), the forward:

       with keep_saved(False):      # the ops run and their records are made, but keep nothing
           y = module(x)
       return apply(MyCheckpoint, x, *module.parameters(), out=y.data, module=module)

   `apply` (minigrad/tensor/tensor.py) runs MyCheckpoint().forward on the raw arrays of its tensor inputs,
   passes the keyword arguments through, and, as for any op, makes the result a tensor whose record
   (its grad_fn) is this MyCheckpoint. That one record stands for the whole segment. Its inputs are
   x AND the parameters: those edges make the output require grad, and let backward reach the
   record even when x itself needs no gradient.

2. MyCheckpoint.forward(self, x, *params, out, module): x and params are NumPy arrays, out is the
   segment's output array (already computed). Keep on self what backward needs (the module, how many
   parameters there are), call self.save_for_backward(x) (x only: that is the whole point) and
   return out. It computes nothing; its FLOPs are given as {}.

3. MyCheckpoint.backward(self, g): g is the gradient of the loss with respect to the output (an array
   of out's shape). Take x back from self.saved, wrap it as a fresh leaf
   `x_again = mg.tensor(x, requires_grad=True)`, and run `y = self.module(x_again)` again inside
   `with enable_grad(), recomputing():` (recording on; the profiler counts these FLOPs as
   'recompute'). Then `y.backward(g)`: a backward inside the backward, which gives every parameter
   its .grad directly, and x_again its .grad. Return one gradient per input of the record, in order:
   x's, then None for each parameter (they already have theirs; returning them too adds them twice):

       (x_again.grad.data, None, None, ...)

One segment alone does not lower the peak of a whole step: while backward recomputes the segment it
holds the segment's activations again. The gain comes with many segments (mg.checkpoint_sequential):
each keeps only its input, and they are recomputed one at a time.

Shapes in the check: x (8, 16), a float64 MLP 16 -> 32 -> 32 -> 16 with Tanh between, y (8, 16).
Graded: x's and every parameter's gradient equal the plain run's exactly (np.array_equal); after the
forward the activations (mg.profile's peak_bytes('activations')) are x's bytes, no more; backward
recomputes the segment exactly once (prof.flops('recompute') is one forward of it).

Grade it:  python -m minigrad check 7
"""
import minigrad as mg  # noqa: F401  (everything your three pieces need is imported here)
from minigrad.ops import Op
from minigrad.tensor import apply, enable_grad, keep_saved, recomputing  # noqa: F401


class MyCheckpoint(Op):
    """The one record that stands for module(x): its inputs are x and the module's parameters."""
    name = "my_checkpoint"

    def forward(self, x, *params, out, module):
        raise NotImplementedError("Exercise 7 (MyCheckpoint.forward): keep module and len(params) on self, "
                                  "call self.save_for_backward(x) (x only) and return out")

    def flops(self, inputs, out):
        return {}  # the segment's own ops counted their FLOPs as they ran

    def backward_flops(self, grad, input_grads):
        return {}  # and the recompute's ops count theirs

    def backward(self, g):
        raise NotImplementedError("Exercise 7 (MyCheckpoint.backward): x_again = mg.tensor(self.saved[0], "
                                  "requires_grad=True); under `with enable_grad(), recomputing():` run "
                                  "y = self.module(x_again); then y.backward(g); return (x_again.grad.data,) "
                                  "followed by one None per parameter")


def my_checkpoint(module, x):
    raise NotImplementedError("Exercise 7 (my_checkpoint): run y = module(x) under `with keep_saved(False):`, "
                              "then return apply(MyCheckpoint, x, *module.parameters(), out=y.data, module=module)")
