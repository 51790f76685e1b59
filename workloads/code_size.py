"""How much code each framework's implementations take, counted from their source text (issue
40): claim 7 of ../shared/CLAIMS.md ("TensorFlow ... more rigid, harder to learn and to adapt";
partly measurable only) and claim 4's "what a user must write" beside each dynamic-shape
strategy's cost.

The reports import neither a framework nor `frameworks` (docs/ARCHITECTURE.md, "Import rules"),
and a report of committed JSON must not change with today's source, so the counts are a table
this script makes from the source (Python's ast: nothing is imported) and that is committed
beside it, code_size.json; tests/test_code_size.py fails when a counted file changes without
the table being made again:

    python -m workloads.code_size --write

Counted per framework (its folder frameworks/<fw>/):

    model <name>         <name>.py of the model workloads (gpt, diffusion), the whole file:
                         `lines`, its logical lines (lines holding code: not blank, not comment,
                         not docstring), and `constructs`, the distinct framework API names it
                         uses: attribute chains on a name it imports from its framework (FACTS'
                         module: tf.function, jax.lax.scan, torch.compile, F.gelu), each once,
                         type annotations aside
    strategy <name>      dynamic.py's dynamic-shape strategies: `constructs`, what the strategy
                         adds to its mode's default (STRATEGY_CONSTRUCTS; each checked to appear
                         in the file), and `lines`, the logical lines of dynamic.py that name the
                         strategy (its name as a string) or one of those constructs (import lines
                         aside); the mode's own constructs are MODE_CONSTRUCTS (checked against
                         the framework's folder: its adapter makes tf.function for dynamic.py)

What the counts are not: fwbench's implementations share helpers a user's code would not need
(precision roles, the harness's checks), so they compare the frameworks' code written to one
plan by one team, not what learning or adapting a framework costs (claim 7's words).
"""
from __future__ import annotations

import ast
import io
import json
import sys
import tokenize
from pathlib import Path
from typing import Any

from workloads.framework_facts import FACTS

ROOT = Path(__file__).resolve().parent.parent
TABLE = Path(__file__).with_name("code_size.json")
MODELS = ("gpt", "diffusion")
# What a compiled (or graph) mode needs over eager, per framework and mode.
MODE_CONSTRUCTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("torch", "compiled"): ("torch.compile",),
    ("jax", "compiled"): ("jax.jit",),
    ("tensorflow", "graph"): ("tensorflow.function",),
    ("tensorflow", "compiled"): ("tensorflow.function", "jit_compile"),
}
# What each dynamic-shape strategy adds to its mode's default (workloads/dynamic.py names them):
# a dotted name is an API name, a bare word a keyword argument; bucketing pads in workloads
# (framework-neutral) and adds no framework construct.
STRATEGY_CONSTRUCTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("torch", "static"): ("dynamic",),
    ("torch", "dynamic"): ("dynamic",),
    ("torch", "mark_dynamic"): ("torch._dynamo.mark_dynamic",),
    ("torch", "bucketed"): (),
    ("jax", "export"): ("jax.export.export", "jax.export.symbolic_shape"),
    ("jax", "static"): ("static_argnums",),
    ("jax", "bucketed"): (),
    ("tensorflow", "input_signature"): ("input_signature", "tensorflow.TensorSpec"),
    ("tensorflow", "reduce_retracing"): ("reduce_retracing",),
    ("tensorflow", "bucketed"): (),
}


def _docstring_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return out


def code_lines(source: str) -> dict[int, str]:
    """{line number: text} of the logical lines: lines holding a code token, docstrings and
    comments aside."""
    tree = ast.parse(source)
    doc = _docstring_lines(tree)
    have: set[int] = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip:
            continue
        for line in range(tok.start[0], tok.end[0] + 1):
            if line not in doc:
                have.add(line)
    text = source.splitlines()
    return {n: text[n - 1] for n in sorted(have)}


def _aliases(tree: ast.AST, module: str) -> dict[str, str]:
    """{local name: dotted name} of everything the file imports from `module`."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == module or a.name.startswith(module + "."):
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == module or node.module.startswith(module + ".")):
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _annotations(tree: ast.AST) -> set[int]:
    """ids of every node inside a type annotation (optional code: not counted as a construct)."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots += [a.annotation for a in (*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs,
                                             node.args.vararg, node.args.kwarg) if a is not None and a.annotation]
            roots += [node.returns] if node.returns else []
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {id(n) for r in roots for n in ast.walk(r)}


def constructs(source: str, module: str, keywords: bool = False) -> list[str]:
    """The distinct API names of `module` the source uses, sorted: each longest attribute chain
    on a name imported from it, resolved to its dotted name (a prefix of another is no name of
    its own), type annotations aside; with `keywords`, also the keyword arguments given to
    them (a strategy's construct may be one: dynamic=True)."""
    tree = ast.parse(source)
    alias = _aliases(tree, module)
    skip = _annotations(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        chain = _dotted(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
        if chain and chain[0] in alias and (not isinstance(node, ast.Name) or isinstance(node.ctx, ast.Load)):
            names.add(".".join([alias[chain[0]], *chain[1:]]))
        if keywords and isinstance(node, ast.Call):
            chain = _dotted(node.func)
            if chain and chain[0] in alias:
                names.update(k.arg for k in node.keywords if k.arg)
    return sorted(n for n in names if n != module and not any(m.startswith(n + ".") for m in names))


def _mentions(text: str, strategy: str, words: tuple[str, ...]) -> bool:
    import re
    if f'"{strategy}"' in text or f"'{strategy}'" in text:
        return True
    tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    return any(w.rsplit(".", 1)[-1] in tokens for w in words)


def _present(construct: str, source: str, found: list[str]) -> bool:
    """A dotted construct among the file's API names; a keyword among them or as a string."""
    if "." in construct:
        return construct in found
    return construct in found or f'"{construct}"' in source


def measure(root: Path = ROOT) -> dict[str, Any]:
    """The table (module docstring), from the source under `root`."""
    out: dict[str, Any] = {"models": {}, "strategies": {}, "modes": {}}
    for fw, facts in FACTS.items():
        folder = root / "frameworks" / fw
        for model in MODELS:
            path = folder / f"{model}.py"
            if path.exists():
                src = path.read_text(encoding="utf-8")
                out["models"].setdefault(fw, {})[model] = {"file": str(path.relative_to(root)),
                                                            "lines": len(code_lines(src)),
                                                            "constructs": len(constructs(src, facts.module))}
        path = folder / "dynamic.py"
        if not path.exists():
            continue
        src = path.read_text(encoding="utf-8")
        found = constructs(src, facts.module, keywords=True)
        lines = {n: t for n, t in code_lines(src).items() if not t.lstrip().startswith(("import ", "from "))}
        every = [(q.read_text(encoding="utf-8")) for q in sorted(folder.glob("*.py"))]   # its adapter makes them
        for (f, mode), words in MODE_CONSTRUCTS.items():
            if f == fw:
                missing = [w for w in words if not any(_present(w, t, constructs(t, facts.module, keywords=True))
                                                       for t in every)]
                if missing:
                    raise SystemExit(f"{folder}: MODE_CONSTRUCTS names {', '.join(missing)} for {fw} {mode}, which "
                                     "no file there uses")
                out["modes"].setdefault(fw, {})[mode] = list(words)
        for (f, strategy), words in STRATEGY_CONSTRUCTS.items():
            if f != fw:
                continue
            missing = [w for w in words if not _present(w, src, found)]
            if missing:
                raise SystemExit(f"{path}: STRATEGY_CONSTRUCTS names {', '.join(missing)} for {fw} {strategy}, "
                                 "which the file does not use")
            out["strategies"].setdefault(fw, {})[strategy] = {
                "file": str(path.relative_to(root)), "constructs": list(words),
                "lines": sum(_mentions(t, strategy, words) for t in lines.values())}
    return out


def load() -> dict[str, Any]:
    """The committed table ({} where it is missing: the reports then say it was not counted)."""
    try:
        return json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = json.dumps(measure(), indent=1, sort_keys=True) + "\n"
    if args == ["--write"]:
        TABLE.write_text(text, encoding="utf-8")
        print(f"wrote {TABLE}")
    elif not args:
        sys.stdout.write(text)
    else:
        print("usage: python -m workloads.code_size [--write]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
