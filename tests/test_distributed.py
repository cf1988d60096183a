"""minigrad.distributed on 2 and 3 MPI processes (mpirun, launched by tests/mpi_harness.py; skipped without MPI).

What must hold: the gradient that data parallel training with accumulation leaves on every rank equals the single
process's full-batch gradient (float64, 1e-12 relative; uneven shards and ignored tokens included); ZeRO stage 1
gives the unsharded optimizer's parameters over 5 steps and holds 1/N of its state per rank, and under a schedule
that writes param_groups, the plain optimizer's to the bit (on 1 and 2 ranks, as PyTorch's does); the ledger counts
the bytes a ring moves; a rank that raises, dies or hangs gives the others a clear error within a bounded time;
ranks that built different models are told so before anything moves.
"""
import os

import pytest

from mpi_harness import ROOT, environment, missing, run_ranks

COMMON = """
import sys, numpy as np
import minigrad as mg, minigrad.distributed as dist, minigrad.functional as F
from minigrad.gpt import GPT, GPTConfig
dist.init_process_group(timeout=float(sys.argv[1]) if len(sys.argv) > 1 else 60)
rank, world = dist.get_rank(), dist.get_world_size()
V = 23
cfg = GPTConfig(vocab_size=V, block_size=8, n_layer=2, n_head=2, n_embd=16)
loss_sum = lambda out, t: F.cross_entropy(out.reshape(-1, V), t.reshape(-1), reduction="sum")
def batch(seed, rows=7):
    mg.manual_seed(seed)
    x, y = mg.randint(0, V, (rows, 8)), mg.randint(0, V, (rows, 8))
    y.data[0, :3] = -100        # padding in the first shard only: the shards differ in their token counts
    y.data[rows - 1, :] = -100  # a whole padded row in the last shard
    return x, y
"""


@pytest.mark.parametrize("ranks", [2, 3])
def test_data_parallel_with_accumulation_gives_the_full_batch_gradient(ranks):
    r = run_ranks(ranks, COMMON + """
mg.manual_seed(rank)                  # a different init on each rank: DistributedDataParallel broadcasts rank 0's
model = GPT(cfg).to("float64")
ddp = dist.DistributedDataParallel(model, bucket_cap_mb=0.01)   # several buckets
x, y = batch(1)                       # 7 rows: uneven shards (4 + 3, or 3 + 2 + 2)
loss, items = dist.accumulation_step(ddp, loss_sum, mg.optim.SGD(model.parameters(), lr=0.0),
                                     dist.shard(x), dist.shard(y), micro_batch_size=2)
alone = GPT(cfg).to("float64")
alone.load_state_dict(model.state_dict())
result = mg.accumulation_step(alone, loss_sum, mg.optim.SGD(alone.parameters(), lr=0.0), x, y, steps=1)
worst = max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max() / np.abs(q.grad.numpy()).max())
            for p, q in zip(model.parameters(), alone.parameters()))
assert worst < 1e-12, worst
assert items == result.items == 7 * 8 - 3 - 8, items
assert abs(loss - result.loss) < 1e-12 * abs(result.loss)
print("ok", worst)
""", timeout=90).check()
    assert all(out.startswith("ok") for out in r.stdout), r


@pytest.mark.parametrize("ranks", [2, 3])
def test_zero_stage_1_equals_the_unsharded_optimizer_and_holds_a_share_of_its_state(ranks):
    r = run_ranks(ranks, COMMON + """
mg.manual_seed(0)
sharded, plain = GPT(cfg).to("float64"), GPT(cfg).to("float64")
plain.load_state_dict(sharded.state_dict())
ddp_s, ddp_p = dist.DistributedDataParallel(sharded), dist.DistributedDataParallel(plain)
zero = dist.ZeroRedundancyOptimizer(sharded.parameters(), mg.optim.AdamW, lr=1e-2, weight_decay=0.1)
adamw = mg.optim.AdamW(plain.parameters(), lr=1e-2, weight_decay=0.1)
for step in range(5):
    x, y = batch(100 + step)
    if step == 4:
        with mg.profile(sharded, zero) as prof:
            dist.accumulation_step(ddp_s, loss_sum, zero, dist.shard(x), dist.shard(y), steps=1)
    else:
        dist.accumulation_step(ddp_s, loss_sum, zero, dist.shard(x), dist.shard(y), steps=1)
    dist.accumulation_step(ddp_p, loss_sum, adamw, dist.shard(x), dist.shard(y), steps=1)
worst = max(float(np.abs(p.detach().numpy() - q.detach().numpy()).max() / np.abs(q.detach().numpy()).max())
            for p, q in zip(sharded.parameters(), plain.parameters()))
assert worst < 1e-12, worst
mine = prof.peak_bytes("optimizer")                   # this rank's moments only
everyone = [None] * world
dist.all_gather_object(everyone, mine)
full = 2 * sum(p.data.nbytes for p in plain.parameters())
assert sum(everyone) == full and max(everyone) < full / world * 1.5, (everyone, full)
# the ledger's traffic: one all-reduce of the gradients (a ring: 2 (N-1)/N of the bytes), of which parameters have
# one (4 bytes each), the item count and the loss (8 bytes each), and the all-gather of the updated parameters (all
# shares but one)
grads = sum(p.data.nbytes for p in sharded.parameters())
allreduce = sum(2 * (world - 1) * n // world for n in (grads, 4 * len(list(sharded.parameters())), 8, 8))
shares = [0] * world
for p in sharded.parameters():
    shares[zero.owner[id(p)]] += p.data.nbytes
assert prof.communicated("sent") == allreduce + sum(shares) - shares[(rank + 1) % world]
assert prof.communicated("received") == allreduce + sum(shares) - shares[rank]
print("ok", worst, mine)
""", timeout=90).check()
    assert all(out.startswith("ok") for out in r.stdout), r


@pytest.mark.parametrize("ranks", [2, 3])
def test_all_gather_object_counts_the_bytes_it_moves(ranks):
    r = run_ranks(ranks, COMMON + """
import pickle
mine = {"rank": rank, "payload": "x" * (100 * rank + 7)}  # a different size on each rank
got = [None] * world
with mg.profile() as prof:
    dist.all_gather_object(got, mine)
assert got == [{"rank": r, "payload": "x" * (100 * r + 7)} for r in range(world)], got
# first the sizes (an all-reduce of one int64 a rank: a ring moves 2 (N-1)/N of it), then the pickles by a ring
# all-gather: each rank sends all of them but the next rank's, and receives all but its own
sizes = 2 * (world - 1) * (8 * world) // world
blobs = [len(pickle.dumps(g)) for g in got]
assert prof.communicated("sent") == sizes + sum(blobs) - blobs[(rank + 1) % world], prof.communicated("sent")
assert prof.communicated("received") == sizes + sum(blobs) - blobs[rank], prof.communicated("received")
print("ok")
""", timeout=60).check()
    assert all(out.startswith("ok") for out in r.stdout), r


ZERO_HELPERS = COMMON + """
import minigrad.nn as nn
name = sys.argv[2]
Optim, kw = getattr(mg.optim, name), dict(SGD=dict(lr=0.1, momentum=0.9), AdamW=dict(lr=1e-2))[name]

def schedule(opt, step):
    # written into every group between steps, as every LR schedule does (warmup, then decay), and more
    for i, g in enumerate(opt.param_groups):
        g["lr"] = kw["lr"] * (i + 1) * min(1.0, (step + 1) / 3) * 0.7 ** step
        g["weight_decay"] = 0.2 * 0.5 ** step if i == 0 else 0.0
        if name == "AdamW":
            g["betas"] = (0.9 - 0.05 * step, 0.999 - 0.002 * step)
        else:
            g["momentum"] = 0.9 - 0.1 * step

def run(model, opt, steps):
    for step in steps:
        schedule(opt, step)
        mg.manual_seed(step)
        x = mg.randn(6, 8, dtype="float64")  # the same batch on every rank: the same gradients, as if all-reduced
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        opt.step()

def differ(a, b):
    return [n for (n, p), q in zip(a.named_parameters(), b.parameters())
            if not np.array_equal(p.detach().numpy(), q.detach().numpy())]

def groups(model):                           # the head joins later, through add_param_group
    trunk = [p for layer in model[:4] for p in layer.parameters()]
    return [{"params": [p for p in trunk if p.ndim == 2]}, {"params": [p for p in trunk if p.ndim == 1]}]
"""

ZERO_SCHEDULE = ZERO_HELPERS + """
mg.manual_seed(0)
sharded = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)).to("float64")
plain = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)).to("float64")
plain.load_state_dict(sharded.state_dict())
zero, alone = dist.ZeroRedundancyOptimizer(groups(sharded), Optim, **kw), Optim(groups(plain), **kw)
run(sharded, zero, range(3)); run(plain, alone, range(3))
assert not differ(sharded, plain), ("a schedule", differ(sharded, plain))
for model, opt in ((sharded, zero), (plain, alone)):
    opt.add_param_group({"params": list(model[4].parameters()), "lr": 0.05})
run(sharded, zero, range(3, 5)); run(plain, alone, range(3, 5))
assert not differ(sharded, plain), ("add_param_group", differ(sharded, plain))
mine, theirs = zero.state_dict(), alone.state_dict()
assert mine["param_groups"] == theirs["param_groups"], (mine["param_groups"], theirs["param_groups"])
shares = [None] * world                            # this rank's share of the state: together, all of it, once
dist.all_gather_object(shares, sorted(mine["state"]))
assert sorted(k for share in shares for k in share) == sorted(theirs["state"]) and all(shares), shares
assert all(np.array_equal(v, theirs["state"][k][key]) for k, s in mine["state"].items() for key, v in s.items())
restarted = dist.ZeroRedundancyOptimizer(groups(sharded) + [{"params": list(sharded[4].parameters())}], Optim, **kw)
restarted.load_state_dict(alone.state_dict())      # a whole optimizer's state: this rank keeps its share
assert {id(p) for p in restarted.state} == {id(p) for p in sharded.parameters() if restarted.owner[id(p)] == rank}
run(sharded, restarted, range(5, 7)); run(plain, alone, range(5, 7))
assert not differ(sharded, plain), ("load_state_dict", differ(sharded, plain))
print("ok")
"""


@pytest.mark.parametrize("name", ["SGD", "AdamW"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_zero_takes_what_a_schedule_writes_into_param_groups_as_the_plain_optimizer_does(ranks, name):
    # Found: its param_groups were its own copy, never read by step(): lr (and every hyperparameter) written there
    # was ignored, and after 3 steps of this schedule the parameters were of order 1 (relative) from the plain
    # optimizer's. Equal to the bit now, also after add_param_group and load_state_dict. 1 rank: the whole state.
    r = run_ranks(ranks, ZERO_SCHEDULE, 60, name, timeout=90).check()
    assert r.stdout == ["ok\n"] * ranks, r


@pytest.mark.parametrize("ranks", [1, 2])
def test_zero_with_a_schedule_equals_torch_zero_redundancy_optimizer(ranks):
    # PyTorch's takes what a schedule writes into its param_groups too (its step() copies them into the wrapped
    # optimizer's), and shares out a group added later
    pytest.importorskip("torch")
    r = run_ranks(ranks, ZERO_HELPERS + """
import socket
import torch, torch.distributed as tdist
from torch.distributed.optim import ZeroRedundancyOptimizer
port = [None] * world                        # torch.distributed on gloo beside MPI, at a port rank 0 found free
if rank == 0:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    free = s.getsockname()[1]
    s.close()
dist.all_gather_object(port, free if rank == 0 else None)
tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port[0]}", rank=rank, world_size=world)

def run_torch(model, opt, steps):             # run(), in PyTorch, on the same batches
    for step in steps:
        schedule(opt, step)
        mg.manual_seed(step)
        x = torch.from_numpy(mg.randn(6, 8, dtype="float64").numpy())
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        opt.step()

for name in ("SGD", "AdamW"):              # one job for both: importing torch takes seconds
    Optim, kw = getattr(mg.optim, name), dict(SGD=dict(lr=0.1, momentum=0.9), AdamW=dict(lr=1e-2))[name]
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)).to("float64")
    theirs = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                 torch.nn.Linear(16, 4)).double()
    with torch.no_grad():
        for p, q in zip(model.parameters(), theirs.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    zero = dist.ZeroRedundancyOptimizer(groups(model), Optim, **kw)
    torch_zero = ZeroRedundancyOptimizer(groups(theirs), getattr(torch.optim, name), **kw)
    run(model, zero, range(3)); run_torch(theirs, torch_zero, range(3))
    for m, opt in ((model, zero), (theirs, torch_zero)):
        opt.add_param_group({"params": list(m[4].parameters()), "lr": 0.05})
    run(model, zero, range(3, 6)); run_torch(theirs, torch_zero, range(3, 6))
    worst = max(float(np.abs(p.detach().numpy() - q.detach().numpy()).max() / np.abs(q.detach().numpy()).max())
                for p, q in zip(model.parameters(), theirs.parameters()))
    assert worst < 1e-12, (name, worst)
tdist.barrier()                                # no rank leaves gloo while another still talks to it (rank 0 holds
tdist.destroy_process_group()                  # the store): without these, gloo aborted a rank at exit now and then
dist.all_gather_object([None] * world, rank)
print("ok")
""", 60, "SGD", timeout=120).check()
    assert r.stdout == ["ok\n"] * ranks, r


FAILING_STEP = COMMON + """
import os, time
mg.manual_seed(0)
model = GPT(cfg)
ddp = dist.DistributedDataParallel(model)
opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    if step == 2 and rank == 1:
        how = sys.argv[2]
        if how == "raise":
            raise ValueError("a bad batch on rank 1")
        if how == "die":
            os._exit(3)
        if how == "hang":
            time.sleep(60)
    x, y = batch(step)
    dist.accumulation_step(ddp, loss_sum, opt, dist.shard(x), dist.shard(y), steps=1)
print("finished")
"""


@pytest.mark.parametrize("how, others_say", [
    ("raise", "rank 1 failed (ValueError: a bad batch on rank 1)"),
    ("die", "was stopped by mpirun (SIGTERM): another rank exited or died"),
    ("hang", "not every rank arrived within 3 s"),
])
def test_a_rank_that_fails_mid_step_stops_every_other_rank_with_a_clear_error(how, others_say):
    r = run_ranks(3, FAILING_STEP, 3, how, timeout=45)
    assert not r.timed_out and r.returncode != 0, r
    assert r.seconds < 30, r                                   # bounded: well inside the harness's limit
    for rank in (0, 2):
        assert "finished" not in r.stdout[rank], r
        assert "DistributedError" in r.stderr[rank] and others_say in r.stderr[rank], r
    if how == "raise":
        assert "ValueError: a bad batch on rank 1" in r.stderr[1], r


def test_ranks_that_built_different_models_are_told_before_anything_moves():
    r = run_ranks(2, COMMON + """
model = GPT(GPTConfig(vocab_size=V, block_size=8, n_layer=2, n_head=2, n_embd=16 if rank == 0 else 24))
dist.DistributedDataParallel(model)
print("built")
""", timeout=45)
    assert r.returncode != 0, r
    for rank in (0, 1):
        assert "built" not in r.stdout[rank]
        assert "the ranks built different models: rank 0 has wte.weight (23, 16) float32, rank 1 has wte.weight " \
               "(23, 24) float32" in r.stderr[rank], r


def test_lesson_10_runs_on_two_processes(tmp_path):
    import subprocess
    import sys
    reason = missing()
    if reason:
        pytest.skip(reason)
    lesson = os.path.join(ROOT, "lessons", "10_data_parallel.py")
    r = subprocess.run([sys.executable, lesson, "--quick"], cwd=tmp_path, env=environment(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "$ mpirun -n 2 python lessons/10_data_parallel.py --quick" in out
    worst = float(out.split("relative to the largest entry of each: ")[1].split()[0])
    assert worst < 1e-12
    assert (tmp_path / "out" / "10_data_parallel.png").stat().st_size > 20_000
    assert out.strip().splitlines()[-2:] == ["Now build it:", out.strip().splitlines()[-1]]


def test_collectives_on_tensors():
    r = run_ranks(3, COMMON + """
t = mg.tensor([1.0, 2.0]) * (rank + 1)
dist.all_reduce(t)
assert t.tolist() == [6.0, 12.0], t
b = mg.tensor([float(rank)] * 3, dtype="float64")
dist.broadcast(b, src=2)
assert b.tolist() == [2.0] * 3 and b.dtype == mg.float64
got = [None] * world
dist.all_gather_object(got, {"rank": rank})
assert got == [{"rank": 0}, {"rank": 1}, {"rank": 2}]
rows = dist.shard(mg.arange(7))
assert rows.tolist() == [[0, 1], [2, 3], [4, 5, 6]][rank], rows
dist.barrier()
print("ok")
""", timeout=45).check()
    assert r.stdout == ["ok\n"] * 3, r


def test_without_a_process_group_the_error_says_how_to_start_one():
    import minigrad.distributed as dist
    with pytest.raises(RuntimeError, match=r"init_process_group\(\) first .*mpirun -n N"):
        dist.get_rank()
    with pytest.raises(ValueError, match="backend='mpi'"):
        dist.init_process_group(backend="nccl")


# ----------------------------------------------------------------------------- one process, no MPI: the glue

class _Done:
    def Test(self):
        return True


class _OneRank:
    """An MPI communicator of one process (no mpi4py needed): every collective is a copy."""

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def Iallreduce(self, array, out):
        out[...] = array
        return _Done()

    def Ibcast(self, array, root=0):
        return _Done()

    def Iallgatherv(self, send, spec):
        spec[0][...] = send
        return _Done()

    def Iprobe(self, source=None, tag=None, status=None):
        return False


@pytest.fixture
def one_rank(monkeypatch):
    import minigrad.distributed as dist
    monkeypatch.setattr(dist._group, "comm", _OneRank())
    monkeypatch.setattr(dist._group, "MPI", type("MPI", (), {"ANY_SOURCE": -1, "Status": staticmethod(lambda: None)}))
    return dist


def test_one_rank_step_is_the_single_process_step_and_an_unused_parameter_keeps_no_gradient(one_rank):
    """dist.accumulation_step on one rank is mg.accumulation_step: the same gradient, loss, items and AdamW step.
    A parameter the forward does not use (here a second head) has no gradient in one process, so AdamW leaves it;
    all_reduce_gradients gave it zeros, and AdamW's weight decay then moved it (PyTorch's DistributedDataParallel
    leaves its .grad None)."""
    import numpy as np

    import minigrad as mg
    import minigrad.functional as F
    from minigrad import nn

    class TwoHeads(nn.Module):
        def __init__(self):
            self.body, self.head, self.unused = nn.Linear(6, 8), nn.Linear(8, 5), nn.Linear(8, 5)

        def forward(self, x):
            return self.head(self.body(x).tanh())

    mg.manual_seed(0)
    alone, shared = TwoHeads().to("float64"), TwoHeads().to("float64")
    shared.load_state_dict(alone.state_dict())
    ddp = one_rank.DistributedDataParallel(shared)
    opts = [mg.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) for m in (alone, shared)]
    x, y = mg.randn(7, 6, dtype="float64"), mg.tensor(np.array([0, 1, -100, 3, 4, 2, 1]))

    def loss_sum(out, t):
        return F.cross_entropy(out, t, reduction="sum")
    for _ in range(2):
        want = mg.accumulation_step(alone, loss_sum, opts[0], x, y, micro_batch_size=3)
        loss, items = one_rank.accumulation_step(ddp, loss_sum, opts[1], one_rank.shard(x), one_rank.shard(y),
                                                 micro_batch_size=2)
        assert items == want.items == 6 and abs(loss - want.loss) < 1e-12 * want.loss
        assert shared.unused.weight.grad is None and alone.unused.weight.grad is None
        for p, q in zip(alone.parameters(), shared.parameters()):
            if p.grad is not None:
                assert np.abs(p.grad.numpy() - q.grad.numpy()).max() < 1e-12 * np.abs(p.grad.numpy()).max()
            assert np.abs(p.detach().numpy() - q.detach().numpy()).max() < 1e-12, "the steps differ"


def test_one_rank_step_of_a_causal_lm_that_shifts_its_labels_is_the_single_process_step(one_rank):
    """A loss that scores the logits at t against the label at t + 1 (transformers' ForCausalLMLoss) averages over
    labels[..., 1:]: dist.accumulation_step counted every label and was refused, with no option to count as the loss
    does; loss_shifts_labels=True counts as mg.accumulate's does, the same gradient, loss and items."""
    import numpy as np

    import minigrad as mg
    import minigrad.functional as F
    from minigrad.gpt import GPT, GPTConfig

    V = 7
    mg.manual_seed(0)
    alone, shared = (GPT(GPTConfig(vocab_size=V, block_size=5, n_layer=1, n_head=1, n_embd=4)).to("float64")
                     for _ in range(2))
    shared.load_state_dict(alone.state_dict())
    ddp = one_rank.DistributedDataParallel(shared)
    ids = mg.randint(0, V, (4, 5))
    y = ids.numpy().copy()
    y[1, 3:], y[2, 2:] = -100, -100

    def shifted_sum(logits, t):
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), t[:, 1:].reshape(-1), reduction="sum")
    want = mg.accumulation_step(alone, shifted_sum, mg.optim.SGD(alone.parameters(), lr=0.1), ids, mg.tensor(y),
                                micro_batch_size=3, loss_shifts_labels=True)
    loss, items = one_rank.accumulation_step(ddp, shifted_sum, mg.optim.SGD(shared.parameters(), lr=0.1),
                                             one_rank.shard(ids), one_rank.shard(mg.tensor(y)), micro_batch_size=2,
                                             loss_shifts_labels=True)
    assert items == want.items == 11 and abs(loss - want.loss) < 1e-12 * want.loss, (items, loss, want)
    for p, q in zip(alone.parameters(), shared.parameters()):
        assert np.abs(p.grad.numpy() - q.grad.numpy()).max() <= 1e-12 * np.abs(p.grad.numpy()).max()


class _SecondOfTwo(_OneRank):
    """Rank 1 of 2, whose shard is empty; rank 0 (simulated) counted 5 items and has every gradient. Notes the dtype
    of each array it all-reduces."""

    def __init__(self):
        self.sent = []

    def Get_rank(self):
        return 1

    def Get_size(self):
        return 2

    def Iallreduce(self, array, out):
        self.sent.append(array.dtype.name)
        out[...] = array + {0: 5, 1: 1}.get(len(self.sent) - 1, 0)  # the item count, then which gradients exist
        return _Done()


def test_an_empty_shard_all_reduces_float32_gradients_of_float16_parameters_as_the_others_do(one_rank, monkeypatch):
    """accumulate gives float16 parameters float32 gradient buffers; a rank whose shard was empty (a batch smaller
    than the world) ran no accumulate and sent float16 zeros into the same all-reduce as the others' float32 sums:
    different datatypes and byte counts in one MPI collective. It sends float32 zeros now."""
    import numpy as np

    import minigrad as mg
    import minigrad.functional as F
    from minigrad import nn

    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)).to("float16")
    ddp = one_rank.DistributedDataParallel(model)
    comm = _SecondOfTwo()
    monkeypatch.setattr(one_rank._group, "comm", comm)
    x, y = mg.randn(0, 4).to("float16"), mg.randint(0, 2, (0,))
    loss, items = one_rank.accumulation_step(ddp, lambda o, t: F.cross_entropy(o, t, reduction="sum"),
                                             mg.optim.SGD(model.parameters(), lr=0.1), x, y, steps=1)
    assert items == 5 and comm.sent == ["float64", "int32", "float32", "float64"], comm.sent
    assert all(p.grad.dtype == np.float32 and not p.grad.numpy().any() for p in model.parameters())
