import numpy as np

import minigrad as mg


def test_mlp_backward_matches_hand_derivation():
    x = mg.randn(3, 4, dtype="float64")
    lin = mg.nn.Linear(4, 5).to("float64")
    y = lin(x).tanh().sum()
    y.backward()
    xn, w, b = x.numpy(), lin.weight.detach().numpy(), lin.bias.detach().numpy()
    h = np.tanh(xn @ w.T + b)
    gz = 1 - h ** 2
    np.testing.assert_allclose(lin.weight.grad.numpy(), gz.T @ xn, rtol=1e-12)
    np.testing.assert_allclose(lin.bias.grad.numpy(), gz.sum(0), rtol=1e-12)
    assert x.grad is None  # the data batch gets no gradient
