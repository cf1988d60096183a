"""Exercise 10: optimal checkpointing. The fewest forward steps that reverse a chain with s slots.

sqrt(n) segments (exercise 9) are simple, not the best. The best schedule for a chain of equal
steps is the answer to a small game (Griewank and Walther's, behind revolve, 2000):

    A chain of n steps: step i turns state x_{i-1} into x_i (i = 1 .. n). The backward reverses the
    steps in the order n, n-1, ..., 1, and reversing step i needs x_{i-1} at hand. You start with x_0
    at hand, stored in one of your s slots. The moves:
      advance        run one step forward from the state at hand, x_j -> x_{j+1}:   costs 1
      store          put the state at hand in a free slot; free a slot:              free
      restore        make a stored state the one at hand:                            free
      reverse step i when x_{i-1} is at hand and steps i+1 .. n are reversed:        free
                     (its own forward, run with the tape on, is part of reversing it)

optimal_steps(n, slots): the fewest advances that reverse all n steps; math.inf if it cannot be
done. An advance is one step's forward run again: in checkpointing terms, the recompute.

    n = 1: 0, whatever the slots: x_0 is at hand, reverse step 1.
    n = 3, 1 slot (x_0's): advance 2, reverse 3; restore x_0, advance 1, reverse 2; restore x_0,
           reverse 1. 3 steps. One slot costs n(n-1)/2; n-1 slots cost n-1 (store every state).
    n = 2, 0 slots: impossible (after one advance, x_0 is lost): math.inf.

The recursion. Call opt(k, t) the cost of reversing a chain of k steps that starts with its first
state at hand, with t slots (the first state takes one of them, if it needs storing). An optimal
schedule first advances m steps (1 <= m < k) to x_m; reverses the last k - m steps starting from
x_m with the t - 1 slots not holding x_0 (x_m takes one of them); then reverses the first m steps
from x_0 again, with all t slots free for it:

    opt(k, t) = min over m in 1 .. k-1 of   m + opt(k - m, t - 1) + opt(m, t)
    opt(k, t) = 0 when k <= 1;   opt(k, 0) = math.inf when k > 1

Written as it stands, this recursion calls the same (k, t) pairs again and again: exponential time
(n = 20 takes seconds). Compute each pair once: memoize (functools.lru_cache) or fill a table for
t = 1 .. slots and k = 2 .. n. That is O(n^2 slots); optimal_steps(200, 10) must take under 0.5 s.
Return an int for a possible schedule.

minigrad.schedules.binomial_steps is the closed form of the same number and schedules.revolve cuts
a chain with it; the grader compares with both, with a search over every schedule for small n,
and with the recompute FLOPs mg.profile measures when revolve's plan runs. Don't call them here.

Grade it:  python -m minigrad check 10
"""
import functools  # noqa: F401  (lru_cache)
import math  # noqa: F401  (math.inf)


def optimal_steps(n, slots):
    raise NotImplementedError("Exercise 10 (optimal_steps): 0 if n <= 1, math.inf if slots == 0, else the min over "
                              "m of m + optimal_steps(n - m, slots - 1) + optimal_steps(m, slots), memoized")
