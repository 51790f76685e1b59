"""A pytest plugin that `fwbench run` loads into each framework's pytest process
(`-p reports.util.pytest_events`): it appends one JSON line per event to the file named by
the FWBENCH_EVENTS environment variable, and does nothing when that is unset.

    {"event": "collected", "cases": [{"nodeid": ..., "workload": "gpt", "framework": ..., ...}]}
    {"event": "start", "nodeid": ...}
    {"event": "machine", "machine": {"host": ..., "cpu": ..., "machine_id": ...}}   (before the first done)
    {"event": "done", "nodeid": ..., "outcome": "passed|skipped|failed", "reason": ...,
     "benchmark": <the entry pytest-benchmark would write to benchmarks[]>,
     "records": [<records of cases that did not run, added by this case>]}
    {"event": "finish", "exitstatus": 0, "missing": {...}}

The parent reads the stream for its progress display, and if the process dies before
pytest-benchmark writes its JSON (a crash, a timeout), rebuilds that JSON from the cases
that finished, so their timings survive and the case that was running is named.
Case identity comes from the parametrization (item.callspec.params) and the module's
WORKLOAD, never from parsing test names. Imports pytest only.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

import pytest

_state: dict[str, Any] = {"session": None, "sent": 0}


def _emit(event: dict[str, Any]) -> None:
    path = os.environ.get("FWBENCH_EVENTS")
    if not path or _state.get("broken"):
        return
    line = json.dumps(event, default=str)
    try:
        with open(path, "a", encoding="utf-8") as f:   # one write per line: a crash leaves whole lines
            f.write(line + "\n")
            f.flush()
    except OSError as e:     # a full disk must not fail the benchmark itself; the log says why
        _state["broken"] = True
        print(f"fwbench: cannot write the event stream {path}: {e.strerror or e}", file=sys.stderr, flush=True)


def _watch_parent(parent: int) -> None:
    """End this process group when fwbench run (the parent) is gone: the portable half of
    the parent-death signal that fwbench run also asks Linux for."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os.killpg(os.getpgrp(), signal.SIGKILL)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("FWBENCH_EVENTS") and os.getpgrp() == os.getpid():   # fwbench run's own group
        threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True, name="fwbench-parent").start()


def _case(item: pytest.Item) -> dict[str, Any]:
    """The case's identity: plain parameters as they are, and a value with `fields()` (the
    benchmark modules' workloads.case.Case) by its fields."""
    callspec = getattr(item, "callspec", None)
    params: dict[str, Any] = {}
    for k, v in (callspec.params.items() if callspec else ()):
        if isinstance(v, (str, int, float)):
            params[k] = v
        elif callable(getattr(v, "fields", None)):
            params.update({f: x for f, x in v.fields().items() if isinstance(x, (str, int, float))})
    module = getattr(item, "module", None)
    return {"nodeid": item.nodeid, "workload": getattr(module, "WORKLOAD", None), **params}


def pytest_collection_finish(session: pytest.Session) -> None:
    _emit({"event": "collected", "cases": [_case(i) for i in session.items], "t": time.time()})


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _emit({"event": "start", "nodeid": nodeid, "t": time.time()})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    phases = item.stash.setdefault(_PHASES, [])
    phases.append(report)
    if call.when != "teardown":
        return
    failed = next((r for r in phases if r.failed), None)
    skipped = next((r for r in phases if r.skipped), None)
    result, reason = "passed", None
    if failed is not None:
        result, reason = "failed", _first_line(failed.longreprtext)
    elif skipped is not None:
        result = "skipped"
        lr = skipped.longrepr
        reason = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else _first_line(str(lr))
        reason = reason.removeprefix("Skipped: ")
    funcargs = getattr(item, "funcargs", None) or {}
    bench = funcargs.get("benchmark")
    entry = None
    if bench is not None and bench.stats is not None and not bench.stats.has_error:
        entry = bench.stats.as_dict(include_data=True)
    session = funcargs.get("fwbench_session")
    records = []
    if session is not None:
        if session is not _state["session"]:
            _state["session"], _state["sent"] = session, 0
            # the node that measures, before its first case's results: a result file rebuilt
            # on another host (a Slurm job that died) names it (the harness reads it: this
            # plugin imports no fwbench module)
            node = getattr(session, "node", None)
            if callable(node) and os.environ.get("FWBENCH_EVENTS"):
                _emit({"event": "machine", "machine": node(), "t": time.time()})
        records = session.records[_state["sent"]:]
        _state["sent"] = len(session.records)
    # the compiler start-ups measured so far ({"framework/mode": s}): a rebuilt result keeps them
    startup = dict(getattr(session, "compiler_startup", None) or {})
    _emit({"event": "done", "nodeid": item.nodeid, "outcome": result, "reason": reason,
           "duration": sum(r.duration for r in phases), "benchmark": entry, "records": records,
           "compiler_startup": startup, "t": time.time()})


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    fw = _state["session"]
    _emit({"event": "finish", "exitstatus": int(exitstatus),
           "missing": dict(fw.missing) if fw is not None else {}, "t": time.time()})


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    # pytest's failure text ends with "E   SomeError: message" lines; the first of them says most
    errs = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    return (errs[0] if errs else lines[-1] if lines else "")[:500]


_PHASES = pytest.StashKey[list]()
