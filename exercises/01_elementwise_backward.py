"""Exercise 1 (after lesson 5): the backward of elementwise ops.

An op in minigrad is a small class (the engine's are in minigrad/ops/pointwise.py). Its forward(*arrays)
computes the output from raw NumPy arrays and names, with self.save_for_backward(...), what its backward
will read. Its backward(g) receives g, the gradient of the loss with respect to the op's output (an array
of the output's shape), reads what forward saved from self.saved, and returns a tuple with one gradient
per array input, even for one. Pow's exponent is a Python number kept on self, not an input.

For an elementwise op, each output element depends on the input element at the same place and on
nothing else, so the chain rule works element by element: the gradient at each element of x is the
incoming g there times the op's own derivative there.

The forwards are written, and each saves one array: the one its derivative can be written from alone.
For Exp and Tanh that is the OUTPUT, not the input. Write the four backwards, each derivative in terms
of what was saved.

Graded: each backward against central finite differences in float64 (which element, what was expected,
what came), the forward against NumPy, the tuple, and what Exp and Tanh keep (mg.profile: their output
and nothing else).

Explain (graded: set EXPLAIN, below, to a number). y = x.exp(); z = y.log() runs on a float32 x of
1,000 elements that requires grad. How many bytes do the two records keep for their backward, together,
counted as the ledger counts them?

Grade it:  python -m minigrad check 1        (stuck? python -m minigrad check 1 --hint)
"""
import numpy as np

from minigrad.ops import Op

EXPLAIN = None  # your answer to the question at the end of the docstring

class Exp(Op):
    name = "exp"
    flops_per_element = (1, (1,))

    def forward(self, x):
        y = np.exp(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        raise NotImplementedError("Exercise 1 (Exp.backward): the gradient at x is not written yet")


class Tanh(Op):
    name = "tanh"
    flops_per_element = (1, (3,))

    def forward(self, x):
        y = np.tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        raise NotImplementedError("Exercise 1 (Tanh.backward): the gradient at x is not written yet")


class Log(Op):
    name = "log"
    flops_per_element = (1, (1,))

    def forward(self, x):
        self.save_for_backward(x)
        return np.log(x)

    def backward(self, g):
        raise NotImplementedError("Exercise 1 (Log.backward): the gradient at x is not written yet")


class Pow(Op):
    name = "pow"
    flops_per_element = (1, (3,))

    def forward(self, x, exponent):
        self.exponent = exponent
        self.save_for_backward(x)
        return x ** exponent

    def backward(self, g):
        raise NotImplementedError("Exercise 1 (Pow.backward): the gradient at x is not written yet")
