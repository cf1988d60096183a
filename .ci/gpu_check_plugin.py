"""A pytest plugin for .ci/gpu-check: each test's outcome, one JSON line as it finishes, appended to
$GPU_CHECK_RESULTS, so that the summary counts what ran even when the suite is stopped at its time limit. Under
pytest-xdist the workers' reports reach the controller, which alone writes them."""
import json
import os

_path = None


def pytest_configure(config):
    global _path
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), not an xdist worker
        _path = os.environ.get("GPU_CHECK_RESULTS")


def pytest_runtest_logreport(report):
    if not _path:
        return
    if report.when == "call" or report.outcome == "failed" or (report.when == "setup" and report.skipped):
        outcome = report.outcome if report.when == "call" or report.skipped else "error"
        with open(_path, "a") as f:
            f.write(json.dumps(dict(test=report.nodeid, outcome=outcome, when=report.when,
                                    seconds=round(report.duration, 3))) + "\n")
