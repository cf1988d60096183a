"""Data-parallel training over MPI: one model per process, each on its share of the batch, gradients summed.

    python -m minigrad launch -n 2 train.py                  # MPI from the package index: pip install -e '.[mpi]'
    mpirun -n 2 python train.py                              # the same, with an mpirun of your own

    import minigrad.distributed as dist
    dist.init_process_group()                                # MPI through mpi4py; rank and world size from mpirun
    model = dist.DistributedDataParallel(model)              # rank 0's weights everywhere, shapes checked first
    opt = dist.ZeroRedundancyOptimizer(model.parameters(), mg.optim.AdamW, lr=1e-3)   # optional: ZeRO stage 1
    x, y = dist.shard(x), dist.shard(y)                      # this rank's rows of the batch
    dist.accumulation_step(model, loss_sum, opt, x, y, micro_batch_size=2)

Summing gradients over micro-batches (accumulate.py) and over processes is one idea, NOTE [normalising by
items] twice: every process divides its micro-batches' summed losses by the number of items in the whole
batch, counted over all processes; then the sum of the processes' gradients (one all-reduce per step, after
all the micro-batches) is exactly the full batch's gradient, whatever the shards' sizes and padding.

NOTE [buckets]: the gradients go in a few large all-reduces, not one per parameter: each call pays a latency
(microseconds to milliseconds), so they are copied into flat buffers of about `bucket_cap_mb`, in reverse
order of registration (the order backward finishes them), as PyTorch's DistributedDataParallel does.

NOTE [ZeRO stage 1]: AdamW keeps 8 bytes of state per parameter, twice the parameters, on every process.
ZeroRedundancyOptimizer gives each process the state of its share of the parameters only (1/N of it),
steps that share, and all-gathers the updated parameters (Rajbhandari et al. 2019; PyTorch's
torch.distributed.optim.ZeroRedundancyOptimizer).

NOTE [no hangs]: a collective waits for every process. If one raised (a bad batch, a bug) or died, the others
would wait forever. So every wait here has a deadline (`timeout`), and a process that fails with an unhandled
exception tells the others as it exits (an atexit handler): each of them raises DistributedError naming the rank
and its error, instead of hanging; one that mpirun stops (SIGTERM, after another rank died) says so too.

The ledger (mg.profile) counts the bytes each process sends and receives (`prof.communicated()`), as a ring
moves them (Patarasuk and Yuan 2009, NCCL's algorithm): an all-reduce of n bytes over N processes sends and
receives 2 (N - 1) / N x n on each; an all-gather sends and receives all but one share.

Read next: gpt.py, the model lesson 10 trains on two processes.
"""
import atexit
import importlib.util
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from . import backend, nn
from .accumulate import _half, accumulate, count_items, micro_batch_slices
from .optim import Optimizer
from .tensor import Tensor, active_profiler, no_grad

ABORT = 77          # the MPI tag of a "rank r failed: ..." message (NOTE [no hangs])


class DistributedError(RuntimeError):
    """Another process failed or did not arrive in time, or the processes disagree (parameter shapes)."""


class _Group:
    comm = None        # an MPI communicator of its own (a duplicate of COMM_WORLD)
    MPI = None
    timeout = 60.0


_group = _Group()


# ----------------------------------------------------------------------------- the process group

def init_process_group(backend="mpi", timeout=60.0):
    """Join the processes that mpirun started (torch.distributed's name). backend: 'mpi' (mpi4py) only.
    timeout: seconds a collective waits for the others before it raises DistributedError."""
    if backend != "mpi":
        raise ValueError(f"init_process_group: minigrad runs on MPI (backend='mpi'), got backend={backend!r}")
    if _group.comm is not None:
        raise RuntimeError("init_process_group: already initialized; call destroy_process_group() first")
    try:
        from mpi4py import MPI  # imported here: importing it starts MPI, which `import minigrad` must not do
    except ImportError:
        raise ImportError("init_process_group: needs mpi4py and an MPI library: pip install -e '.[mpi]' (mpi4py "
                          "and Open MPI from the package index), then launch with mpirun -n 2 python ...") from None
    _group.MPI, _group.comm, _group.timeout = MPI, MPI.COMM_WORLD.Dup(), float(timeout)
    atexit.register(_at_exit)  # runs before mpi4py's own exit handler (registered earlier) ends MPI
    # mpirun ends the job with SIGTERM when a process exits with an error (or dies) without telling: say so
    signal.signal(signal.SIGTERM, _terminated)


def destroy_process_group():
    if _group.comm is not None:
        atexit.unregister(_at_exit)
        _group.comm.Free()
        _group.comm = None


def is_initialized():
    return _group.comm is not None


def get_rank():
    return _comm().Get_rank()


def get_world_size():
    return _comm().Get_size()


def barrier():
    _wait(_comm().Ibarrier(), "barrier")


def _comm():
    if _group.comm is None:
        raise RuntimeError("minigrad.distributed: call dist.init_process_group() first (and launch the script with "
                           "mpirun -n N python ...)")
    return _group.comm


def launch(n, script, args=(), env=None):
    """Run `python script args` on n processes under the mpirun beside this Python (the `mpi` extra's) and return
    its exit status: how lesson 10 and bench/data_parallel.py start themselves when they are run alone. env adds to
    this process's environment. Raises ImportError, saying what to install, where mpi4py or mpirun is missing."""
    mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if mpirun is None or importlib.util.find_spec("mpi4py") is None:
        raise ImportError("this needs MPI: pip install -e '.[mpi]' (mpi4py and Open MPI from the package index)")
    env = {**os.environ, **(env or {})}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Open MPI refuses to start as root unless told twice; containers often run as root
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    command = [mpirun, "-n", str(n), "--oversubscribe", "--bind-to", "none", sys.executable, script, *map(str, args)]
    return subprocess.run(command, env=env).returncode


# ----------------------------------------------------------------------------- waiting without hanging

def _at_exit():
    """At exit, on an unhandled exception (Python keeps it in sys.last_value once it has printed the traceback): tell
    the other ranks, unless it was their failure this rank reported, then leave at once, since MPI_Finalize would
    wait for collectives that will never complete. mpirun then stops the job."""
    comm, value = _group.comm, getattr(sys, "last_value", None)
    if comm is None or value is None:
        return  # a normal exit: mpi4py's own handler finalizes MPI
    if not isinstance(value, DistributedError):
        note = pickle.dumps(f"{type(value).__name__}: {value}")
        requests = [comm.Isend(note, dest=r, tag=ABORT) for r in range(comm.Get_size()) if r != comm.Get_rank()]
        deadline = time.monotonic() + 2.0
        while requests and time.monotonic() < deadline and not _group.MPI.Request.Testall(requests):
            time.sleep(0.001)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _terminated(signum, frame):
    raise DistributedError(f"rank {_group.comm.Get_rank()} was stopped by mpirun (SIGTERM): another rank exited or "
                           f"died; its exit code and the first error are in mpirun's message")


def _check_the_others(what):
    """Raise DistributedError if another rank said it failed."""
    MPI, comm = _group.MPI, _group.comm
    status = MPI.Status()
    if comm.Iprobe(source=MPI.ANY_SOURCE, tag=ABORT, status=status):
        note = bytearray(status.Get_count(MPI.BYTE))
        comm.Recv(note, source=status.Get_source(), tag=ABORT)
        raise DistributedError(f"{what}: rank {status.Get_source()} failed ({pickle.loads(note)}); rank "
                               f"{comm.Get_rank()} stops too (its traceback is on rank {status.Get_source()}'s "
                               f"stderr)")


def _wait(request, what):
    """Wait for a non-blocking collective, with a deadline, watching for another rank's failure."""
    _check_the_others(what)
    deadline = time.monotonic() + _group.timeout
    pause = 1e-5
    while not request.Test():
        _check_the_others(what)
        if time.monotonic() > deadline:
            raise DistributedError(f"{what}: not every rank arrived within {_group.timeout:g} s (rank "
                                   f"{_group.comm.Get_rank()} of {_group.comm.Get_size()} waited); another rank died, "
                                   f"hangs, or runs a different number of steps. Raise the limit with "
                                   f"init_process_group(timeout=...) if a step is that slow")
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)  # spin briefly, then let the other processes have the cores


def _clock():
    """The active profile's clock as a collective begins (None without one): _report dates the collective by it."""
    profiler = active_profiler()
    return profiler.start_clock() if profiler is not None else None


def _report(op, sent, received, clock=None):
    profiler = active_profiler()
    if profiler is not None:
        profiler.on_communication(op, sent, received, clock)


def _report_ring_gather(op, nbytes, clock):
    """A ring all-gather of rank r's nbytes[r]: each rank sends all shares but the next rank's (which started
    there) and receives all but its own."""
    rank, world = get_rank(), get_world_size()
    _report(op, sum(nbytes) - nbytes[(rank + 1) % world], sum(nbytes) - nbytes[rank], clock)


# ----------------------------------------------------------------------------- collectives on tensors

def all_reduce(tensor, op="sum"):
    """Sum `tensor` over all ranks, in place (torch.distributed.all_reduce; op 'sum' only)."""
    if op != "sum":
        raise ValueError(f"all_reduce: op='sum' only, got {op!r}")
    host = backend.to_numpy(tensor.data)
    result = _all_reduce_array(np.ascontiguousarray(host), "all_reduce")
    with no_grad():
        tensor.data[...] = backend.to_device(result, tensor.device)
    return tensor


def _all_reduce_array(array, what):
    comm, n = _comm(), _comm().Get_size()
    out = np.empty_like(array)
    clock = _clock()
    _wait(comm.Iallreduce(array, out), what)
    _report(what, 2 * (n - 1) * array.nbytes // n, 2 * (n - 1) * array.nbytes // n, clock)
    return out


def broadcast(tensor, src=0):
    """Every rank gets rank src's values, in place (torch.distributed.broadcast)."""
    host = np.ascontiguousarray(backend.to_numpy(tensor.data))
    clock = _clock()
    _wait(_comm().Ibcast(host, root=src), "broadcast")
    rank = get_rank()
    _report("broadcast", host.nbytes if rank == src else 0, 0 if rank == src else host.nbytes, clock)
    with no_grad():
        tensor.data[...] = backend.to_device(host, tensor.device)
    return tensor


def all_gather_object(object_list, obj):
    """object_list[r] = rank r's obj, on every rank (torch.distributed.all_gather_object): any picklable object."""
    if len(object_list) != get_world_size():
        raise ValueError(f"all_gather_object: object_list needs one slot per rank ({get_world_size()}), got "
                         f"{len(object_list)}: [None] * dist.get_world_size()")
    object_list[:] = _all_gather_objects(obj, "all_gather_object")


def _all_gather_objects(obj, what):
    comm, blob = _comm(), pickle.dumps(obj)
    sizes = _all_reduce_array(_one_hot(len(blob)), what)
    out = np.empty(int(sizes.sum()), np.uint8)
    counts = sizes.astype(int)
    clock = _clock()
    _wait(comm.Iallgatherv(np.frombuffer(blob, np.uint8), [out, counts]), what)
    _report_ring_gather(what, [int(c) for c in counts], clock)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return [pickle.loads(out[s:s + c].tobytes()) for s, c in zip(starts, counts)]


def _one_hot(value):
    """An array that is `value` at this rank's slot and 0 elsewhere: summed over ranks, every rank's value."""
    a = np.zeros(get_world_size(), np.int64)
    a[get_rank()] = value
    return a


def shard(tensor, dim=0):
    """This rank's part of `tensor` along dim: contiguous rows, as even as can be (the last ranks get one more
    when the size does not divide), so that the shards of all ranks make the whole batch in order."""
    n, rank, world = tensor.shape[dim], get_rank(), get_world_size()
    bounds = [r * n // world for r in range(world + 1)]
    key = (slice(None),) * (dim % tensor.ndim) + (slice(bounds[rank], bounds[rank + 1]),)
    return tensor[key]


# ----------------------------------------------------------------------------- data parallel

class DistributedDataParallel(nn.Module):
    """The model on every rank, rank 0's parameters and buffers broadcast to the others at the start (after a
    check that every rank built the same shapes). Forward is the model's. `all_reduce_gradients()` sums the
    ranks' gradients in buckets (NOTE [buckets]); accumulation_step does it once per step."""

    def __init__(self, module, bucket_cap_mb=25):
        self.module = module
        self.bucket_cap_bytes = int(bucket_cap_mb * 2**20)
        named = list(module.named_parameters()) + list(module.named_buffers())
        _check_same_everywhere([(name, tuple(t.shape), t.dtype.name) for name, t in named])
        for _, t in named:
            broadcast(t, src=0)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def all_reduce_gradients(self):
        """Sum every parameter's .grad over the ranks, in place, in flat buckets of about bucket_cap_mb. A parameter
        that has no .grad on any rank (the forward did not use it) keeps none, as PyTorch's DistributedDataParallel
        (find_unused_parameters=True) leaves it: the optimizer then skips it as it would in one process, where zeros
        would move it (weight decay, momentum). One that has a .grad on some rank gets the sum everywhere."""
        params = [p for p in self.module.parameters() if p.requires_grad][::-1]  # the order backward ends them
        used = _all_reduce_array(np.array([p.grad is not None for p in params], np.int32), "all_reduce (which grads)")
        params = [p for p, n in zip(params, used) if n]
        for bucket in _buckets(params, self.bucket_cap_bytes):
            # 2-byte parameters' gradients go as float32 (accumulate's buffers), whatever this rank has: one dtype
            wire = np.result_type(*[np.float32 if _half([p]) else p.dtype for p in bucket])  # on every rank
            flat = np.concatenate([_grad_or_zeros(p).reshape(-1) for p in bucket]).astype(wire, copy=False)
            flat = _all_reduce_array(flat, "all_reduce (gradients)")
            at = 0
            for p in bucket:
                part = backend.to_device(flat[at:at + p.numel()].reshape(p.shape), p.device)
                at += p.numel()
                if p.grad is None:
                    p.grad = Tensor._from_array(part)
                else:
                    p.grad.data[...] = part


def _grad_or_zeros(p):
    return backend.to_numpy(p.grad.data) if p.grad is not None else np.zeros(p.shape, p.dtype)


def _buckets(params, cap):
    bucket, size = [], 0
    for p in params:
        if bucket and size + p.data.nbytes > cap:
            yield bucket
            bucket, size = [], 0
        bucket.append(p)
        size += p.data.nbytes
    if bucket:
        yield bucket


def _check_same_everywhere(signature):
    """Every rank must have built the same parameters: compare names, shapes and dtypes before anything moves."""
    everyone = _all_gather_objects(signature, "DistributedDataParallel (checking shapes)")
    for rank, theirs in enumerate(everyone):
        if theirs != everyone[0]:
            diff = next(((a, b) for a, b in zip(everyone[0], theirs) if a != b), None)
            detail = (f"rank 0 has {diff[0][0]} {diff[0][1]} {diff[0][2]}, rank {rank} has {diff[1][0]} {diff[1][1]} "
                      f"{diff[1][2]}" if diff else f"rank 0 has {len(everyone[0])} tensors, rank {rank} "
                      f"{len(theirs)}")
            raise DistributedError(f"DistributedDataParallel: the ranks built different models: {detail}. Build the "
                                   f"same model on every rank (the same config); rank 0's values are then copied")


def accumulation_step(model, loss_fn, optimizer, inputs, targets, *, micro_batch_size=None, steps=None,
                      ignore_index=-100, mask=None, loss_shifts_labels=False):
    """One optimizer step on the whole batch, of which `inputs`/`targets` are this rank's shard:
    optimizer.zero_grad(); the shard in micro-batches (accumulate.py), each divided by the item count of the whole
    batch over all ranks (NOTE [normalising by items]); one bucketed all-reduce of the gradients; optimizer.step().
    loss_fn returns the SUM of its micro-batch's losses (a causal LM's that shifts its labels: loss_shifts_labels=True,
    as mg.accumulate). Returns the whole batch's mean loss and item count."""
    if not isinstance(model, DistributedDataParallel):
        raise TypeError(f"accumulation_step: wrap the model first, dist.DistributedDataParallel(model); got "
                        f"{type(model).__name__}")
    n = inputs.shape[0]
    slices = micro_batch_slices(n, micro_batch_size, steps) if n else []
    micro_batches = [(inputs[s], targets[s]) + ((mask[s],) if mask is not None else ()) for s in slices]
    local = sum(count_items(mb[1], ignore_index, mb[2] if len(mb) > 2 else None, loss_shifts_labels)
                for mb in micro_batches)
    total = float(_all_reduce_array(np.array([local], np.float64), "all_reduce (item count)")[0])  # a float mask's
    total = int(total) if total.is_integer() else total  # sum is a float (exact for counts below 2**53)
    if total == 0:
        raise ValueError("accumulation_step: the batch has no item to learn from on any rank")
    optimizer.zero_grad()
    loss = 0.0
    if micro_batches:
        # counted as accumulate counts (_counted): it still checks the loss's count against this rank's
        result = accumulate(model, loss_fn, micro_batches=micro_batches, ignore_index=ignore_index, total_items=total,
                            loss_shifts_labels=loss_shifts_labels, _counted=True)
        loss = result.loss
    model.all_reduce_gradients()
    optimizer.step()
    return float(_all_reduce_array(np.array([loss]), "all_reduce (loss)")[0]), total


# ----------------------------------------------------------------------------- ZeRO stage 1

class ZeroRedundancyOptimizer(Optimizer):
    """optimizer_class(params, **defaults) with its state sharded over the ranks (NOTE [ZeRO stage 1]): each rank
    owns a share of the parameters (whole parameters, balanced by size), keeps the state of its share only and
    steps it; the updated parameters are then all-gathered. The gradients must be the same on every rank (summed
    by DistributedDataParallel) for the result to equal the unsharded optimizer's, which it does exactly.

    NOTE [ZeRO's param_groups]: `param_groups` are the whole model's groups, the same on every rank, with every
    hyperparameter of optimizer_class's (its defaults too), and they are what steps: a schedule writes lr (or
    weight_decay, betas, ...) there, as into any optimizer's, and step() first copies each group's values into the
    wrapped optimizer's group of the same index, which holds this rank's share of its parameters (perhaps none).
    PyTorch's ZeroRedundancyOptimizer syncs them so. add_param_group shares the new parameters out too; state_dict()
    holds this rank's share of the state; load_state_dict keeps this rank's share of what it is given (a whole
    optimizer's state dict too) and its hyperparameters."""

    def __init__(self, params, optimizer_class, **defaults):
        self.owner = None  # add_param_group, which Optimizer.__init__ calls, shares out parameters once it is set
        super().__init__(params, defaults)
        self.owner, self._loads = {}, [0] * get_world_size()
        self._share_out(self.params)
        self.optim = optimizer_class([self._share_of(g) for g in self.param_groups], **defaults)
        self.state = self.optim.state  # the ledger counts this rank's share
        _copy_hyperparameters(self.optim.param_groups, self.param_groups)  # its defaults (eps, ...) show here too

    def _share_out(self, params):
        """Give each parameter an owner: largest first, to the least loaded rank (the same on every rank)."""
        for p in sorted(params, key=lambda p: -p.numel()):
            r = self._loads.index(min(self._loads))
            self.owner[id(p)] = r
            self._loads[r] += p.numel()

    def _share_of(self, group):
        """The group with this rank's share of its parameters only, for the wrapped optimizer."""
        rank = get_rank()
        return {**group, "params": [p for p in group["params"] if self.owner[id(p)] == rank]}

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if self.owner is not None:  # after the constructor: the new parameters get owners, as in PyTorch
            group = self.param_groups[-1]
            self._share_out(group["params"])
            self.optim.add_param_group(self._share_of(group))
            _copy_hyperparameters(self.optim.param_groups[-1:], [group])

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)  # checked, its hyperparameters in param_groups, its state in self.state
        rank = get_rank()
        self.optim.state = {p: s for p, s in self.state.items() if self.owner[id(p)] == rank}
        self.state = self.optim.state

    def step(self):
        _copy_hyperparameters(self.param_groups, self.optim.param_groups)  # NOTE [ZeRO's param_groups]
        self.optim.step()
        rank, world = get_rank(), get_world_size()
        params = self.params
        mine = [p for p in params if self.owner[id(p)] == rank]
        dtype = np.result_type(*[p.dtype for p in params])
        send = (np.concatenate([backend.to_numpy(p.data).reshape(-1) for p in mine]).astype(dtype)
                if mine else np.zeros(0, dtype))
        counts = [sum(p.numel() for p in params if self.owner[id(p)] == r) for r in range(world)]
        out = np.empty(sum(counts), dtype)
        clock = _clock()
        _wait(_comm().Iallgatherv(send, [out, counts]), "all_gather (parameters)")
        _report_ring_gather("all_gather (parameters)", [c * dtype.itemsize for c in counts], clock)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        at = {r: int(start[r]) for r in range(world)}
        with no_grad():
            for p in params:
                r = self.owner[id(p)]
                if r != rank:
                    p.data[...] = backend.to_device(out[at[r]:at[r] + p.numel()].reshape(p.shape).astype(p.dtype),
                                                    p.device)
                at[r] += p.numel()


def _copy_hyperparameters(source, target):
    """Every value but 'params' of each group in `source` into the group of the same index in `target`."""
    for src, dst in zip(source, target):
        dst.update((k, v) for k, v in src.items() if k != "params")


__all__ = ["launch", "init_process_group", "destroy_process_group", "is_initialized", "get_rank", "get_world_size", "barrier",
           "all_reduce", "broadcast", "all_gather_object", "shard", "DistributedDataParallel", "ZeroRedundancyOptimizer",
           "accumulation_step", "DistributedError"]
