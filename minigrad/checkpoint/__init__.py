"""Activation checkpointing (being split into modules: segment.py holds it all for now)."""
from .segment import (DETERMINISM_CHECKS, DOTS, SCORE_OPS, Checkpoint, CheckpointOutput, OpCache, checkpoint,
                      checkpoint_blocks, checkpoint_policies, checkpoint_segments, checkpoint_sequential,
                      dots_saveable, everything_saveable, is_recomputing, measure_chain, nothing_saveable,
                      save_anything_except_core_attention, set_checkpoint_early_stop)
from .segment import __all__
