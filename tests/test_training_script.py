"""A PyTorch training script (tests/pytorch_script.py) runs on minigrad unchanged apart from its imports, and
trains as it does on PyTorch: the same losses within float32 rounding, the same learning rates to the bit, the same
accuracy. The names it uses: nn.Module, nn.Linear, nn.init.kaiming_uniform_ and constant_, F.gelu,
torch.utils.checkpoint.checkpoint, torch.from_numpy, nn.CrossEntropyLoss(label_smoothing=...), AdamW with param
groups, nn.utils.clip_grad_norm_, lr_scheduler.SequentialLR of LinearLR and CosineAnnealingLR, get_last_lr,
state_dict, inference_mode, .cpu(), argmax(axis=1)."""
import importlib.util
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "pytorch_script.py")
IMPORTS = {  # PyTorch's import lines -> minigrad's: the only change
    "import torch\n": "import minigrad as torch\n",
    "import torch.nn as nn\n": "import minigrad.nn as nn\n",
    "import torch.nn.functional as F\n": "import minigrad.functional as F\n",
    "from torch.utils.checkpoint import checkpoint\n": "from minigrad.utils.checkpoint import checkpoint\n",
}


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def minigrad_version(tmp_path):
    source = open(SCRIPT, encoding="utf-8").read()
    for theirs, ours in IMPORTS.items():
        assert source.count(theirs) == 1, f"the script should import {theirs.strip()!r} once"
        source = source.replace(theirs, ours)
    assert "torch" not in "".join(line for line in source.splitlines(True) if line.startswith(("import", "from"))
                                  and "minigrad" not in line)
    changed = [(a, b) for a, b in zip(open(SCRIPT).read().splitlines(), source.splitlines()) if a != b]
    assert len(changed) == len(IMPORTS) and all(a.startswith(("import", "from")) for a, _ in changed)
    path = tmp_path / "minigrad_script.py"
    path.write_text(source, encoding="utf-8")
    return path


def test_the_minigrad_run_of_a_pytorch_script_needs_only_its_imports_changed(tmp_path):
    ours = load(minigrad_version(tmp_path), "minigrad_script").main()
    losses, lrs, accuracy, weights, last_epoch = ours
    assert len(losses) == 20 and last_epoch == 20 and all(np.isfinite(losses))
    assert losses[-1] < losses[0]  # it learns
    pytest.importorskip("torch")
    sys.modules.pop("pytorch_script", None)
    t_losses, t_lrs, t_accuracy, t_weights, t_last_epoch = load(SCRIPT, "pytorch_script").main()
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5, atol=1e-6)  # float32: the same arithmetic, other order
    assert lrs == t_lrs and last_epoch == t_last_epoch  # the schedule: bit for bit
    assert accuracy == pytest.approx(t_accuracy, abs=1 / 256)  # one sample's argmax may tip over
    for name, w in t_weights.items():
        np.testing.assert_allclose(weights[name], w, rtol=1e-5, atol=1e-6, err_msg=name)
