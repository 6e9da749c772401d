"""pytest hooks of tests/python: one "PASS: / FAIL: / SKIP: python/NAME" line
per test into $PYTEST_ASR_RESULTS (tests/python/run.sh prints them)."""
import os


def pytest_runtest_logreport(report):
    out = os.environ.get("PYTEST_ASR_RESULTS")
    if not out:
        return
    name = "python/" + report.nodeid.split("::", 1)[-1]
    line = None
    if report.when == "call":
        line = ("PASS" if report.passed else "SKIP" if report.skipped else "FAIL") + ": " + name
    elif report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        line = "SKIP: %s (%s)" % (name, reason.replace("Skipped: ", ""))
    elif report.failed:
        line = "FAIL: %s (%s)" % (name, report.when)
    if line:
        with open(out, "a") as f:
            f.write(line + "\n")
