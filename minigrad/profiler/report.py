"""The reports of mg.profile: the ledger's counts and the clocks' times, as a learner reads them.

    print(prof.table())      # ops (calls, bytes saved), self time and FLOPs by phase, bytes by category
    prof.timeline()          # one event per op run: the bytes of each category after it
    format_bytes(3 * 2**20), format_flops(2e9), format_seconds(0.0042)   # '3.0 MiB', '2.00 G', '4.20 ms'
    CATEGORY_COLORS["gradients"], PHASE_COLORS["recompute"]               # the colours every plot draws them in

Nothing here counts: each report reads the tables that ledger.py and clocks.py keep.

Read next: export.py, which writes the same counts for a trace viewer and a browser.
"""
from .clocks import PHASES, TIMED_PHASES
from .ledger import CATEGORIES

# NOTE [one colour per category]: every plot of the lessons and commands draws a category, and shades a phase, in
# these colours (matplotlib's names; nothing here imports matplotlib), so that gradients are the same green in lesson
# 2's timeline, lesson 4's bars and lesson 10's ranks. The phases take colours no category has.
CATEGORY_COLORS = {"parameters": "tab:blue", "optimizer": "tab:orange", "gradients": "tab:green",
                   "activations": "tab:red", "transient": "tab:purple"}
PHASE_COLORS = {"forward": "tab:cyan", "recompute": "tab:olive", "backward": "tab:gray"}


def format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def format_flops(n):
    for unit in ("", "k", "M", "G", "T"):
        if abs(n) < 1000 or unit == "T":
            return f"{n:.0f}" if unit == "" else f"{n:.2f} {unit}"
        n /= 1000


def format_seconds(s):
    if abs(s) < 1e-3:
        return f"{s * 1e6:.0f} µs"
    return f"{s * 1e3:.2f} ms" if abs(s) < 1 else f"{s:.2f} s"


class _Reports:
    """The reports' part of mg.profile (profiler/__init__.py puts the parts together): they read the ledger's
    and the clocks' tables."""

    def timeline(self):
        """The events in order: [{'index', 'op', 'phase', bytes per category after it, 'total'}, ...].

        One event per op run (phase 'forward', 'backward' or 'recompute'), one per optimizer state
        buffer made (phase 'step'; a step that makes none, as every step after the first, has one of its
        own, 'AdamW.step'), and 'start' and 'end'. It grows by one event per op for as long
        as the profile is open.
        """
        return [dict(index=i, op=op, phase=phase, **dict(zip(CATEGORIES, current)), total=sum(current))
                for i, (op, phase, current) in enumerate(self._events)]

    def table(self, times=True):
        """Small tables: ops (calls, bytes saved), their self time by phase (time=False leaves it out: it differs
        from run to run), FLOPs by kind and phase, bytes by category, and bytes sent by collective if any."""
        ops_run = sorted({name for _, name in self._calls})
        head = f"{'op':<13}{'forward':>9}{'backward':>10}{'recompute':>11}{'saved':>12}"
        lines = [head, "-" * len(head)]
        for name in ops_run:
            lines.append(f"{name:<13}" + "".join(f"{self.calls(p, name):>{w}}" for p, w in zip(PHASES, (9, 10, 11)))
                         + f"{format_bytes(self._saved.get(name, 0)):>12}")
        lines.append("(calls per phase; saved: bytes the op kept for backward, summed over its calls: a buffer "
                     "that two ops save shows in both rows)")
        if times:
            lines += [""] + self._time_table()
        kinds = sorted({name for _, name in self._flops})
        head = f"{'FLOPs':<13}" + "".join(f"{p:>14}" for p in PHASES)
        lines += ["", head, "-" * len(head)]
        for name in kinds + ["total"]:
            op = None if name == "total" else name
            lines.append(f"{name:<13}" + "".join(f"{format_flops(self.flops(p, op)):>14}" for p in PHASES))
        lines.append("(matrix products count under 'matmul' whichever op made them; see docs/ledger.md)")
        lines += ["", f"{'bytes':<13}{'peak':>12}{'now':>12}", "-" * 37]
        for c in CATEGORIES:
            lines.append(f"{c:<13}{format_bytes(self.peak_bytes(c)):>12}{format_bytes(self.current_bytes(c)):>12}")
        lines.append(f"{'total':<13}{format_bytes(self.peak_bytes()):>12}{format_bytes(self.current_bytes()):>12}")
        if self._traffic:
            lines += ["", f"{'collective':<26}{'sent':>12}{'received':>12}", "-" * 50]
            for name, (sent, received) in sorted(self._traffic.items()):
                lines.append(f"{name:<26}{format_bytes(sent):>12}{format_bytes(received):>12}")
        return "\n".join(lines)

    def _time_table(self):
        """Self time by op and phase, slowest op first; shares of the block's time less the profiler's."""
        block = self.wall_seconds() - self.overhead_seconds()  # what the block takes without a profile, roughly
        names = sorted({name for _, name in self._self_ns}, key=lambda name: -self.seconds(op=name))
        head = f"{'self time':<13}" + "".join(f"{p:>11}" for p in TIMED_PHASES) + f"{'total':>11}{'share':>8}"
        lines = [head, "-" * len(head)]

        def row(label, cells, total):
            share = f"{total / block:.1%}" if block > 0 else "-"
            return f"{label:<13}" + "".join(f"{c:>11}" for c in cells) + f"{format_seconds(total):>11}{share:>8}"
        for name in names:
            lines.append(row(name, [format_seconds(self.seconds(p, name)) if (p, name) in self._self_ns else "-"
                                    for p in TIMED_PHASES], self.seconds(op=name)))
        ran = {p for p, _ in self._self_ns}
        lines.append(row("all ops", [format_seconds(self.seconds(p)) if p in ran else "-" for p in TIMED_PHASES],
                         self.seconds()))
        lines.append(row("not in ops", [""] * len(TIMED_PHASES), block - self.seconds()))
        lines.append("(self time: an op's wall time less the ops that ran inside it (a checkpoint's recompute) and "
                     "the profiler's bookkeeping; not in ops: Python between them)")
        lines.append(f"(share: of the block's {format_seconds(self.wall_seconds())} less the profiler's own "
                     f"bookkeeping, {format_seconds(self.overhead_seconds())}: {format_seconds(block)})")
        return lines
