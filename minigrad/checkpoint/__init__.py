"""Activation checkpointing: keep a segment's inputs, drop its insides, recompute them in backward.

    y = mg.checkpoint(block, x)                       # one segment
    y = mg.checkpoint_sequential(layers, 4, x)        # a chain cut into 4 segments (the last runs normally)
    y = mg.checkpoint(block, x, policy=mg.checkpoint_policies.dots_saveable)  # keep the products, recompute the rest

The package, each module importing only the ones above it:

    policies.py  selective checkpointing: the policies (mg.checkpoint_policies: what a checkpoint keeps rather
                 than recomputes) and OpCache, what a checkpoint's forward notes op by op and its recompute takes
                 back (NOTE [selective checkpoint], NOTE [writes the tape does not record], NOTE [recompute what
                 backward reads], NOTE [early stop], NOTE [what the recompute reads from outside])
    segment.py   one checkpointed segment: mg.checkpoint, the Checkpoint record that stands for it and the
                 recompute in its backward (NOTE [checkpoint], NOTE [checkpoint outputs], NOTE [checkpoint
                 sums], NOTE [retain_grad inside a checkpoint]); set_checkpoint_early_stop
    chains.py    chains of functions: mg.checkpoint_sequential, checkpoint_segments (runs a schedules.Plan),
                 checkpoint_blocks (a model's transformer blocks), measure_chain (the schedules.Chain a plan
                 is made for)

Read segment.py first, the idea; then policies.py, what its forward consults for each op (it sits below
segment.py because checkpoint() makes an OpCache); then chains.py.

How it works (NOTE [checkpoint], segment.py): the forward runs `function` with recording on but keeping
nothing, which tells us which tensors needing gradients it reached: its inputs and the parameters it uses.
One record replaces all of it: it saves only the inputs (and the RNG state). Its backward re-runs
`function` under `recomputing()` (FLOPs tagged 'recompute' in mg.profile), backpropagates the incoming
gradients through that fresh graph and hands the inputs' gradients on; the parameters get theirs directly.
Gradients are bit-identical to a plain run (NOTE [checkpoint sums]).

Selective checkpointing (NOTE [selective checkpoint], policies.py): a policy picks, op by op, what the forward
keeps anyway; the recompute hands those ops' results back instead of running them. And with or without a policy,
the recompute runs only the ops whose results backward will read (NOTE [recompute what backward reads]).

The semantics are those of PyTorch's non-reentrant torch.utils.checkpoint (use_reentrant=False):
keyword arguments, non-tensor arguments and results, several outputs in tuples, lists and dicts,
gradients for the parameters used inside even when no input requires grad, nesting, retain_graph.

Read next: accumulate.py, the other trick.
"""
from ..tensor import is_recomputing
from .policies import (DOTS, SCORE_OPS, OpCache, checkpoint_policies, dots_saveable, everything_saveable,
                       nothing_saveable, save_anything_except_core_attention)
from .segment import DETERMINISM_CHECKS, Checkpoint, CheckpointOutput, checkpoint, set_checkpoint_early_stop
from .chains import checkpoint_blocks, checkpoint_segments, checkpoint_sequential, measure_chain

__all__ = ["checkpoint", "checkpoint_sequential", "checkpoint_segments", "checkpoint_policies", "measure_chain",
           "is_recomputing", "set_checkpoint_early_stop"]
