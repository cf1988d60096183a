"""Exercise 10, the reference (after lesson 8): optimal checkpointing as a memoized recursion (schedules.binomial_steps
is its closed form)."""
import functools
import math

EXPLAIN = 15  # each advance once means every state stored until its step is reversed: x_0 .. x_14


@functools.lru_cache(maxsize=None)
def optimal_steps(n, slots):
    if n <= 1:
        return 0
    if slots < 1:
        return math.inf
    # advance m, reverse the last n - m with the other slots, then the first m with all of them;
    # m from 1 up, so each recursion on m finds the smaller pairs already computed
    return min(m + optimal_steps(n - m, slots - 1) + optimal_steps(m, slots) for m in range(1, n))
