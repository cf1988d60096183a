"""A PyTorch training script as people write them, which minigrad runs unchanged apart from the imports
(tests/test_training_script.py swaps the import block for minigrad's and compares the two runs):

    python tests/pytorch_script.py        # with PyTorch installed: prints the losses and learning rates

A small MLP with a checkpointed middle block, kaiming init, CrossEntropyLoss with label smoothing, AdamW with weight
decay, gradient clipping, a warmup-then-cosine schedule composed as PyTorch composes it (SequentialLR of LinearLR
and CosineAnnealingLR), and an evaluation under inference_mode.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

STEPS, WARMUP, BATCH = 20, 5, 16


class MLP(nn.Module):
    def __init__(self, d_in=8, width=32, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, width)
        self.fc2 = nn.Linear(width, width)
        self.head = nn.Linear(width, classes)
        for layer in (self.fc1, self.fc2, self.head):
            nn.init.kaiming_uniform_(layer.weight, a=0, mode="fan_in", nonlinearity="relu")
            nn.init.constant_(layer.bias, 0.0)

    def block(self, h):
        return F.gelu(self.fc2(h)) + h

    def forward(self, x):
        h = self.fc1(x).tanh()
        h = checkpoint(self.block, h, use_reentrant=False)
        return self.head(h)


def main(steps=STEPS):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = MLP()
    # The same starting point in both libraries (each draws kaiming's numbers from its own generator): the same
    # distribution, drawn here by NumPy.
    device = next(model.parameters()).device  # where the model was made: the data goes there too
    with torch.no_grad():
        for name, p in model.named_parameters():
            bound = math.sqrt(6 / p.shape[-1]) if p.dim() == 2 else 0.1
            p.copy_(torch.from_numpy(rng.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)).to(device))
    X = rng.standard_normal((256, 8)).astype(np.float32)
    Y = (X[:, :4].argmax(axis=1) + (X[:, 4] > 1)).astype(np.int64) % 4
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-2, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=WARMUP),
              torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - WARMUP, eta_min=1e-4)],
        milestones=[WARMUP])
    losses, lrs = [], []
    model.train()
    for step in range(steps):
        idx = rng.integers(0, len(X), BATCH)
        x, y = torch.from_numpy(X[idx]).to(device), torch.from_numpy(Y[idx]).to(device)
        loss = criterion(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr())
    model.eval()
    with torch.inference_mode():
        logits = model(torch.from_numpy(X).to(device)).cpu()
        accuracy = (logits.argmax(axis=1) == torch.from_numpy(Y)).float().mean().item()
    weights = {n: p.detach().cpu().numpy().copy() for n, p in model.named_parameters()}
    return losses, lrs, accuracy, weights, sched.state_dict()["last_epoch"]


if __name__ == "__main__":
    losses, lrs, accuracy, _, _ = main()
    for i, (loss, lr) in enumerate(zip(losses, lrs)):
        print(f"step {i:2d}  loss {loss:.6f}  lr {lr[0]:.6g}")
    print(f"accuracy {accuracy:.3f}")
