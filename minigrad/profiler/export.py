"""The exports of mg.profile: a profile opened in the tools people already use, as PyTorch's profiler exports it.

    prof.export_chrome_trace("out/step.json")     # Perfetto (ui.perfetto.dev) or chrome://tracing: spans and counters
    prof.export_memory_timeline("out/step.html")  # any browser: memory by category, stacked, event by event

The trace is Chrome's Trace Event Format (the JSON that chrome://tracing, Perfetto and PyTorch's export_chrome_trace
write and read): each op a complete event ('X') on the track of its phase (forward, backward, recompute, step), each
collective one on a track of its own, memory by category a counter ('C') in bytes after each event, and the peak an
instant ('i') with what was alive at it. The page is one HTML file with its data, its script and its style inline (no
network): the ledger's events drawn as stacked areas in the categories' colours (report.CATEGORY_COLORS), the peak
marked with its bytes per category, and each event's op, phase and bytes on hover.

Nothing here counts: both read the ledger's events and the times kept beside them (NOTE [when, beside what],
ledger.py) and the clocks' spans.

Read next: schedules.py and checkpoint/, which trade these bytes for recompute FLOPs.
"""
import html
import json
import os
import re

from .clocks import TIMED_PHASES
from .ledger import CATEGORIES
from .report import CATEGORY_COLORS, PHASE_COLORS, format_bytes

# matplotlib's tab10, by name: the page draws in the colours that the lessons' plots use (NOTE [one colour per
# category], report.py) without importing matplotlib. An optimizer's step has no phase colour there: brown is no
# category's nor phase's.
TAB10 = {"tab:blue": "#1f77b4", "tab:orange": "#ff7f0e", "tab:green": "#2ca02c", "tab:red": "#d62728",
         "tab:purple": "#9467bd", "tab:brown": "#8c564b", "tab:pink": "#e377c2", "tab:gray": "#7f7f7f",
         "tab:olive": "#bcbd22", "tab:cyan": "#17becf"}
STEP_COLOR = "tab:brown"
COMMUNICATION = "communication"  # the track of collectives (distributed.py)
TRACKS = TIMED_PHASES + (COMMUNICATION,)  # one thread id each in the trace, in this order: 1, 2, ...
PID = 1
MEMORY_COUNTER = "memory (bytes)"


class _Exports:
    """The exports' part of mg.profile (profiler/__init__.py puts the parts together): they read the ledger's events,
    the times beside them and the clocks' spans."""

    def _memory_points(self):
        """[(ns, op, phase, bytes per category)] of the events, and the index of the peak among them. Where the total
        peaked between two events (inside an op, or in a factory that makes no event: an array made, and another
        freed before the next event), one point more holds the peak, halfway between them in time: the peak is
        always one of the points. prof.timeline() has no such point."""
        if not self._events:
            raise RuntimeError("profile: nothing to export yet; export a profile after its `with` block has run")
        points = [(ns, op, phase, list(current)) for ns, (op, phase, current) in zip(self._event_ns, self._events)]
        k, at_peak = self._peak_event, list(self._at_peak)
        if k < len(points) and points[k][3] == at_peak:
            return points, k
        if k >= len(points):  # after the last event (the block still open)
            points.append((points[-1][0], "peak", "peak", at_peak))
            return points, len(points) - 1
        before = points[k - 1][0] if k else points[k][0]
        where = f"peak, between {points[k - 1][1]} and {points[k][1]}" if k else f"peak, before {points[k][1]}"
        points.insert(k, ((before + points[k][0]) // 2, where, points[k][2], at_peak))
        return points, k

    # --- Chrome's Trace Event Format
    def export_chrome_trace(self, path):
        """Write the profile as Chrome's Trace Event Format to `path` (JSON; PyTorch's profiler has the same method):
        open it in Perfetto (ui.perfetto.dev) or chrome://tracing. Each op run is a span on its phase's track, each
        collective one on the communication track, memory by category a counter in bytes, the peak an instant.
        Times are microseconds from the block's start. Returns the path."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self._chrome_trace(), f, separators=(",", ":"))
        return path

    def _chrome_trace(self):
        """The trace as a dict: {'traceEvents': [...], 'displayTimeUnit': 'ms'}."""
        points, peak = self._memory_points()
        t0 = points[0][0]  # the 'start' event, taken as the block began
        us = lambda ns: (ns - t0) / 1e3  # noqa: E731
        tid = {track: i + 1 for i, track in enumerate(TRACKS)}
        timed = [dict(name=name, cat=phase, ph="X", ts=us(start), dur=(end - start) / 1e3, pid=PID, tid=tid[phase],
                      args={})
                 for (phase, name), start, end in self._spans]
        timed += [dict(name=name, cat=COMMUNICATION, ph="X", ts=us(start), dur=(end - start) / 1e3, pid=PID,
                       tid=tid[COMMUNICATION], args=dict(sent=sent, received=received))
                  for name, start, end, sent, received in self._comms]
        timed += [dict(name=MEMORY_COUNTER, ph="C", ts=us(ns), pid=PID, tid=0, args=dict(zip(CATEGORIES, current)))
                  for ns, _, _, current in points]
        ns, op, phase, at_peak = points[peak]
        timed.append(dict(name=f"peak {format_bytes(sum(at_peak))}", cat="memory", ph="i", s="p", ts=us(ns), pid=PID,
                          tid=0, args=dict(op=op, phase=phase, total=sum(at_peak), **dict(zip(CATEGORIES, at_peak)))))
        # a span that holds others comes first at the same time (chrome://tracing nests them in the order read)
        timed.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        used = sorted({e["tid"] for e in timed if e["tid"]})
        names = {i + 1: track for i, track in enumerate(TRACKS)}
        meta = [dict(name="process_name", ph="M", pid=PID, tid=0, args=dict(name="minigrad profile"))]
        for t in used:
            meta += [dict(name="thread_name", ph="M", pid=PID, tid=t, args=dict(name=names[t])),
                     dict(name="thread_sort_index", ph="M", pid=PID, tid=t, args=dict(sort_index=t))]
        return {"traceEvents": meta + timed, "displayTimeUnit": "ms",
                "otherData": {"producer": "minigrad mg.profile", "peak_bytes": self.peak_bytes(),
                              "categories": list(CATEGORIES)}}

    # --- the memory timeline page
    def export_memory_timeline(self, path, title=None):
        """Write a self-contained HTML page to `path` (PyTorch's profiler has a method of this name): the live bytes
        by category, stacked, event by event (each op's forward, backward or recompute, each optimizer step or state
        made), the peak marked with what was alive at it, and each event's op, phase and bytes on hover. No network:
        its script, style and data are inline. Returns the path."""
        points, peak = self._memory_points()
        title = title or "mg.profile: live memory by category, event by event"
        data = dict(categories=list(CATEGORIES),
                    colors=[TAB10[CATEGORY_COLORS[c]] for c in CATEGORIES],
                    phases={**{p: TAB10[c] for p, c in PHASE_COLORS.items()}, "step": TAB10[STEP_COLOR]},
                    points=[[op, phase, current, round((ns - points[0][0]) / 1e6, 3)]  # milliseconds from the start
                            for ns, op, phase, current in points],
                    peak=peak)
        ns, op, phase, at_peak = points[peak]
        parts = ", ".join(f"{c} {format_bytes(b)}" for c, b in zip(CATEGORIES, at_peak))
        summary = (f"Peak {format_bytes(sum(at_peak))} at event {peak} of {len(points)} ({op}, {phase}): {parts}.")
        fill = dict(title=html.escape(title), summary=html.escape(summary), script=_SCRIPT,
                    data=json.dumps(data, separators=(",", ":")).replace("</", "<\\/"))  # no "</script>" inside
        page = re.sub(r"\{(title|summary|data|script)\}", lambda m: fill[m.group(1)], _PAGE)  # one pass: an op's
        # name with braces in it stays as it is
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        return path


def write_exports(prof, html_path=None, trace_path=None, title=None):
    """Write the page and/or the trace, making their folders; returns the paths written (`memory --html` uses it)."""
    written = []
    for target, export in ((html_path, lambda p: prof.export_memory_timeline(p, title)),
                           (trace_path, prof.export_chrome_trace)):
        if target:
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            written.append(export(target))
    return written


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #222; background: #fff; }
h1 { font-size: 18px; margin: 0 0 4px; }
p { margin: 4px 0 8px; }
#chart { width: 100%; max-width: 1200px; height: auto; }
#chart text { font-size: 12px; fill: #222; }
#chart .axis line, #chart .axis path { stroke: #444; }
#chart .axis line.grid { stroke: #000; stroke-opacity: .12; }
#tip { position: fixed; pointer-events: none; background: rgba(255,255,255,.96); border: 1px solid #888;
       border-radius: 4px; padding: 6px 8px; font-size: 12px; box-shadow: 0 1px 4px rgba(0,0,0,.2); }
#tip table { border-collapse: collapse; } #tip td { padding: 0 4px; } #tip td.n { text-align: right; }
.sw { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: middle; }
#error { color: #b00; font-weight: bold; }
</style>
</head>
<body>
<h1>{title}</h1>
<p id="summary">{summary}</p>
<p id="error" hidden></p>
<noscript><p>The chart needs JavaScript; the peak is above.</p></noscript>
<svg id="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1200 560" role="img"></svg>
<div id="tip" hidden></div>
<p>Hover over the chart: each event is one op's forward, backward or recompute, or an optimizer's step (each state
it makes, in its first), and the bytes alive after it. Written by minigrad's <code>mg.profile</code>
(<code>export_memory_timeline</code>).</p>
<script id="data" type="application/json">{data}</script>
<script>{script}</script>
</body>
</html>
"""

# The drawing: plain DOM calls, no library. Each event is one unit wide and holds its level until the next (a step
# plot, as lesson 2's); the categories are stacked in CATEGORIES order, parameters at the bottom.
_SCRIPT = r"""
window.onerror = function (message, source, line) {
  document.body.setAttribute("data-error", message + " (line " + line + ")");
  var e = document.getElementById("error");
  e.textContent = "The chart could not be drawn: " + message;
  e.hidden = false;
};
(function () {
  var D = JSON.parse(document.getElementById("data").textContent);
  var C = D.categories, P = D.points, n = P.length;
  var NS = "http://www.w3.org/2000/svg", svg = document.getElementById("chart");
  var W = 1200, H = 560, L = 90, R = 270, T = 20, B = 96, pw = W - L - R, ph = H - T - B;
  var UNITS = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024], ["B", 1]];
  function fmt(b) {
    for (var i = 0; i < UNITS.length; i++) {
      if (Math.abs(b) >= UNITS[i][1] || UNITS[i][0] === "B") {
        return UNITS[i][0] === "B" ? b.toFixed(0) + " B" : (b / UNITS[i][1]).toFixed(1) + " " + UNITS[i][0];
      }
    }
  }
  function el(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    (parent || svg).appendChild(e);
    return e;
  }
  function nice(x) {  // 1, 2 or 5 times a power of ten, at least x
    var p = Math.pow(10, Math.floor(Math.log10(x))), f = x / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  var totals = P.map(function (p) { return p[2].reduce(function (a, b) { return a + b; }, 0); });
  var most = Math.max(1, Math.max.apply(null, totals));
  var unit = UNITS.filter(function (u) { return most >= u[1]; })[0] || UNITS[3];
  var tick = nice(most / unit[1] / 5) * unit[1], top = Math.ceil(most * 1.1 / tick) * tick;
  var x = function (i) { return L + i * pw / n; }, y = function (v) { return T + ph - v / top * ph; };

  // axes and grid: y in the unit that fits the peak, x by event
  var axis = el("g", {"class": "axis"});
  for (var v = 0; v <= top + 1e-9; v += tick) {
    el("line", {x1: L, x2: L + pw, y1: y(v), y2: y(v), "class": "grid"}, axis);
    el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, axis, (v / unit[1]).toFixed(tick / unit[1] < 1 ? 1 : 0));
  }
  el("text", {x: 18, y: T + ph / 2, transform: "rotate(-90 18 " + (T + ph / 2) + ")", "text-anchor": "middle"},
     axis, "live memory (" + unit[0] + ")");
  var xt = Math.max(1, nice(n / 10));
  for (var i = 0; i <= n; i += xt) {
    el("line", {x1: x(i), x2: x(i), y1: T + ph, y2: T + ph + 5}, axis);
    el("text", {x: x(i), y: T + ph + 18, "text-anchor": "middle"}, axis, String(i));
  }
  el("text", {x: L + pw / 2, y: H - 8, "text-anchor": "middle"}, axis,
     "event: one op's forward, backward or recompute, or an optimizer's step, in order (" + n + " events)");

  // the stacked areas, one path per category
  var lower = P.map(function () { return 0; });
  C.forEach(function (c, k) {
    var upper = P.map(function (p, i) { return lower[i] + p[2][k]; });
    var d = "M" + x(0) + "," + y(upper[0]);
    for (var i = 0; i < n; i++) d += "H" + x(i + 1) + (i + 1 < n ? "V" + y(upper[i + 1]) : "");
    for (var i = n - 1; i >= 0; i--) d += "V" + y(lower[i]) + "H" + x(i);
    el("path", {d: d + "Z", fill: D.colors[k], "fill-opacity": 0.85, stroke: "none", "class": "area",
                "data-category": c});
    lower = upper;
  });
  el("line", {x1: L, x2: L, y1: T, y2: T + ph}, axis);
  el("line", {x1: L, x2: L + pw, y1: T + ph, y2: T + ph}, axis);

  // the phases, as a band under the axis
  var bandY = T + ph + 28, start = 0;
  for (var i = 1; i <= n; i++) {
    if (i < n && P[i][1] === P[start][1]) continue;
    var color = D.phases[P[start][1]];
    if (color) el("rect", {x: x(start), y: bandY, width: x(i) - x(start), height: 10, fill: color, "class": "phase",
                           "data-phase": P[start][1]});
    start = i;
  }
  el("text", {x: L - 6, y: bandY + 9, "text-anchor": "end"}, axis, "phase");

  // the peak, and what was alive at it
  var pk = D.peak, at = P[pk][2];
  var px = (x(pk) + x(pk + 1)) / 2;
  el("line", {x1: px, x2: px, y1: T, y2: T + ph, stroke: "#000", "stroke-dasharray": "4 3", "class": "peak"});
  el("circle", {cx: px, cy: y(totals[pk]), r: 4, fill: "#000"});
  var right = px + 160 < L + pw;  // the label beside the line, on the side with room
  el("text", {x: right ? px + 6 : px - 6, y: T + 12, "text-anchor": right ? "start" : "end"}, svg,
     "peak " + fmt(totals[pk]) + " (event " + pk + ")");

  // the legend: each category with its bytes at the peak; the phases' colours
  var lx = L + pw + 24, ly = T + 8;
  el("text", {x: lx, y: ly, "font-weight": "bold"}, svg, "at the peak, " + fmt(totals[pk]) + ":");
  C.slice().reverse().forEach(function (c, j) {
    var k = C.length - 1 - j, row = ly + 22 + j * 20;
    el("rect", {x: lx, y: row - 10, width: 12, height: 12, fill: D.colors[k]});
    el("text", {x: lx + 18, y: row}, svg, c);
    el("text", {x: lx + 230, y: row, "text-anchor": "end"}, svg, fmt(at[k]));
  });
  // the peak's event, wrapped to the legend's width: a peak between two events names both ("peak, between linear
  // and AdamW.step"), which ran past the page's edge on one line; a word too long for a line alone is cut with "…"
  var wide = W - lx - 8, lineY = ly + 22 + C.length * 20 + 4, line = null;
  ("at event " + pk + ": " + P[pk][0] + " (" + P[pk][1] + ")").split(" ").forEach(function (word) {
    var before = line && line.textContent;
    if (line) line.textContent = before + " " + word;
    if (!line || line.getComputedTextLength() > wide) {
      if (line) { line.textContent = before; lineY += 16; }
      line = el("text", {x: lx, y: lineY}, svg, word);
      for (var cut = word.length; cut > 1 && line.getComputedTextLength() > wide; cut--) {
        line.textContent = word.slice(0, cut - 1) + "\u2026";
      }
    }
  });
  var py = lineY + 36;
  el("text", {x: lx, y: py, "font-weight": "bold"}, svg, "phases (the band under the axis):");
  Object.keys(D.phases).forEach(function (p, j) {
    el("rect", {x: lx, y: py + 12 + j * 20, width: 12, height: 12, fill: D.phases[p]});
    el("text", {x: lx + 18, y: py + 22 + j * 20}, svg, p);
  });

  // hover: the event under the pointer
  var tip = document.getElementById("tip");
  var cursor = el("line", {y1: T, y2: T + ph, stroke: "#555", "stroke-width": 1, visibility: "hidden"});
  var hit = el("rect", {x: L, y: T, width: pw, height: ph, fill: "transparent"});
  function show(i, clientX, clientY) {
    cursor.setAttribute("x1", (x(i) + x(i + 1)) / 2); cursor.setAttribute("x2", (x(i) + x(i + 1)) / 2);
    cursor.setAttribute("visibility", "visible");
    var rows = C.map(function (c, k) {
      return "<tr><td><span class=sw style='background:" + D.colors[k] + "'></span>" + c + "</td><td class=n>" +
             fmt(P[i][2][k]) + "</td></tr>";
    }).reverse().join("");
    tip.innerHTML = "<b>event " + i + ": " + P[i][0].replace(/&/g, "&amp;").replace(/</g, "&lt;") + "</b> (" +
                    P[i][1] + ", " + P[i][3] + " ms)<table>" + rows + "<tr><td><b>total</b></td><td class=n><b>" +
                    fmt(totals[i]) + "</b></td></tr></table>";
    tip.hidden = false;
    tip.style.left = Math.min(clientX + 14, window.innerWidth - 240) + "px";
    tip.style.top = (clientY + 14) + "px";
  }
  hit.addEventListener("mousemove", function (ev) {
    var pt = svg.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    var at = pt.matrixTransform(svg.getScreenCTM().inverse()).x;
    show(Math.max(0, Math.min(n - 1, Math.floor((at - L) / pw * n))), ev.clientX, ev.clientY);
  });
  hit.addEventListener("mouseleave", function () { tip.hidden = true; cursor.setAttribute("visibility", "hidden"); });
  var asked = /#hover=(\d+)/.exec(location.hash);  // page.html#hover=12: the tooltip of event 12, as if pointed at
  if (asked) {
    var i = Math.min(n - 1, +asked[1]), pt = svg.createSVGPoint();
    pt.x = (x(i) + x(i + 1)) / 2; pt.y = T + ph / 3;
    var screen = pt.matrixTransform(svg.getScreenCTM());
    show(i, screen.x, screen.y);
  }
  document.body.setAttribute("data-drawn", String(svg.querySelectorAll("path.area").length));
  var box = svg.getBoundingClientRect();  // a label past the chart's edge is cut off: the count of those, for tests
  document.body.setAttribute("data-clipped", String([].filter.call(svg.querySelectorAll("text"), function (t) {
    var b = t.getBoundingClientRect();
    return b.width && (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 ||
                       b.bottom > box.bottom + 0.5);
  }).length));
})();
"""
