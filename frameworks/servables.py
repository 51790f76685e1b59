"""What the three frameworks' serving modules share (frameworks/<fw>/serving.py; the workload:
workloads/serving.py): the case's path and its refusals, the development path's weights file,
the timing and size of an export, an exporter's refusal in its own words, and the eager
model's answers to the check requests.

A framework's module subclasses Servable with `functions` (the task's servable functions,
eager), `dev_engine` (the development path in a mode) and one export method per artefact
strategy (EXPORTS); nothing is exported or compiled before export() is called.
"""
from __future__ import annotations

import contextlib
import os
import re
import time
from typing import Any, Callable, Iterator

import numpy as np

from frameworks.serve import Engine, answers
from workloads import serving as W
from workloads.base import Model, Serve, Unsupported, error_line
from workloads.record import not_its_api

PRECISIONS = ("fp32",)     # the policies a serving build honours
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def exporter_message(e: BaseException) -> str:
    """An exporter's error as one line in its own words: the exception's first line (TensorFlow's
    last, workloads.base.error_line), terminal colours removed; where the message carries an
    exception summary (torch.onnx: "<class '...UserError'>: ..."), that line."""
    text = _ANSI.sub("", str(e))
    summary = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("<class '")), None)
    if summary:
        kind, _, msg = summary.partition(">: ")
        return f"{kind.split('.')[-1].strip(chr(39))}: {msg}"[:500]
    return error_line(e, text)


@contextlib.contextmanager
def refused(what: str) -> Iterator[None]:
    """A block that exports: any error becomes Unsupported("<what>: <exporter's message>"), so
    the harness records the refusal in the exporter's words and nothing is raised further."""
    try:
        yield
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001  the exporter's refusal is the finding
        raise Unsupported(f"{what}: {exporter_message(e)}") from None


def check_onnx(path: str, n_args: int, what: str) -> None:
    """An exported ONNX file that ONNX Runtime could not serve is the exporter's failure: the
    file must pass onnx.checker (with type and shape inference) and take exactly the function's
    arguments as inputs; else Unsupported("<what>: ...") in the checker's words."""
    import onnx
    with refused(f"{what}: the ONNX file fails onnx.checker"):
        onnx.checker.check_model(path, full_check=True)
    graph = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in inits]
    if len(inputs) != n_args:
        raise Unsupported(f"{what}: the ONNX graph takes {len(inputs)} inputs ({', '.join(inputs)[:200]}) for the "
                          f"function's {n_args} arguments")


def tf2onnx_files(functions: dict[str, tuple[Any, list[Any]]], folder: str, what: str) -> dict[str, str]:
    """Each tf.function (with its input signature) converted by tf2onnx into folder/<name>.onnx
    and checked (check_onnx); the files by name."""
    import tf2onnx
    files = {}
    for name, (fn, signature) in functions.items():
        files[name] = os.path.join(folder, f"{name}.onnx")
        with refused(what):
            tf2onnx.convert.from_function(fn, input_signature=signature, output_path=files[name])
        check_onnx(files[name], len(signature), what)
    return files


def folder_bytes(folder: str, skip: tuple[str, ...] = ()) -> int:
    """Bytes of the files under `folder` (the artefact on disk)."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs if f not in skip)


class Servable(Model):
    """workloads.serving.Servable, the part every framework shares. A subclass sets FRAMEWORK
    and defines functions(eager model) and dev_engine, and an export method per artefact
    strategy of its framework (EXPORTS: strategy -> method name)."""
    FRAMEWORK = ""
    EXPORTS: dict[str, str] = {}
    # the framework's own settings of the request loop (frameworks/serve.py: Requests): the
    # dtype of a decode step's position, its idiom for an index (torch: int64)
    SETTINGS: dict[str, Any] = {"position_dtype": "int32"}

    def __init__(self, adapter: Any, config: W.ServingConfig, params: dict[str, Any], case: Any) -> None:
        path = W.path_of(case.framework, case.mode, case.strategy)
        if path is None:
            raise Unsupported(not_its_api(case.framework, f"serving path {case.strategy!r} in {case.mode} mode"))
        why = W.missing(path)
        if why:
            raise Unsupported(why)
        if case.device != "cpu":
            raise Unsupported(f"serving is measured on the CPU in this version (device {case.device!r}: "
                              "docs/design/serving.md)")
        self.path, self.adapter, self.config, self.case = path, adapter, config, case
        self.task, self.model = case.task, W.MODEL_OF[case.task]
        self.params = params[self.model]
        self.model_preset = config.gpt_preset if self.model == "gpt" else config.diffusion_preset

    # -- for the subclass ------------------------------------------------------------------
    def dev_engine(self, mode: str) -> Engine:
        """The development path in `mode`, in this process."""
        module = __import__(f"frameworks.{self.FRAMEWORK}.serving", fromlist=["dev_engine"])
        return module.dev_engine(self.adapter, self.model_preset, self.params, self.task, mode)

    # -- workloads.serving.Servable ---------------------------------------------------------
    def export(self, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Write what the serving process loads; return its job and the record's keys."""
        job = {"framework": self.FRAMEWORK, "loop": "generate" if self.task == "generate" else "sample",
               "settings": self.SETTINGS}
        if self.path.kind == W.DEVELOPMENT:
            weights = os.path.join(folder, "weights.npz")
            np.savez(weights, **self.params)
            job.update(engine="dev", files={"weights": weights},
                       dev={"preset": self.model_preset, "task": self.task, "mode": self.case.mode})
            return job, {"exporter": None, "export_s": None, "artefact_bytes": os.path.getsize(weights),
                         "dynamic_dims": None}
        export: Callable[[str], tuple[dict[str, Any], dict[str, Any]]] = getattr(self, self.EXPORTS[self.case.strategy])
        t0 = time.perf_counter()
        made, keys = export(folder)
        keys.update(export_s=time.perf_counter() - t0, artefact_bytes=folder_bytes(folder))
        job.update(made)
        return job, keys

    def expected(self, serve: Serve) -> list[Any]:
        """The eager model's answers to the check requests, by the serving loop."""
        return answers(self.dev_engine("eager"), serve.loop, dict(serve.settings), serve.check, self.SETTINGS)
