"""Print the error every serving path's answers achieve against its framework's eager model on
the same weights and requests (the check before timing): the numbers workloads/serving.py's TOL
is set from. Each artefact is exported and loaded in this process (the fresh serving process
loads the same files the same way: frameworks/serve.py LOADERS).
Run: python -m tests.measure.measure_serving [preset ...]  (default: tiny small)"""
from __future__ import annotations

import sys
import tempfile

import frameworks
from frameworks.serve import LOADERS, answers
from tests.support.helpers import INSTALLED
from workloads import serving as W
from workloads.base import Unsupported
from workloads.case import Case


def main(presets: tuple[str, ...]) -> None:
    for preset in presets:
        cfg = W.preset(preset).config
        params = W.init_params(cfg)
        for p in W.PATHS:
            if p.framework not in INSTALLED or W.missing(p):
                continue
            a = frameworks.load(p.framework)
            for task in W.TASKS:
                serve = W.task_spec(cfg, 1, task).serve
                model = a.build(Case(p.framework, "serving", task, p.mode, p.strategy), cfg, params)
                try:
                    job, _ = model.export(tempfile.mkdtemp(prefix="fwbench-measure-"))
                except Unsupported as e:
                    print(preset, task, p.framework, p.mode, p.strategy, "refused:", e, flush=True)
                    continue
                want = model.expected(serve)
                with a.own_precision():
                    got = answers(LOADERS[job["engine"]]({**job, "threads": a.threads}), serve.loop,
                                  dict(serve.settings), serve.check, job["settings"])
                errs = [W.check_error(task, g, w) for g, w in zip(got, want)]
                same = all(W.differs(task, g, w, float("inf")) is None for g, w in zip(got, want))
                print(preset, task, p.framework, p.mode, p.strategy, f"rel_err={max(errs):.2e}",
                      "tokens equal" if task == "generate" and same else "", flush=True)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or ("tiny", "small"))
