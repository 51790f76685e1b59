"""TensorFlow's reduced-precision policies (workloads/precision.py) for the GPT and the DDPM UNet,
tiny presets: the shared checks of tests/support/precision_checks.py for TensorFlow (equivalence against
the float64 references at the policy's tolerances in eager, graph and compiled mode; 50 graph
training steps against fp32), and what only TensorFlow can do:

1. A probe of the dtypes the programs actually run: the graphs TF traces for the reduced
   forward, loss, gradients, train step, generation and sampling (every op of the graph and of
   its function library, while-loop bodies included), in graph and compiled (XLA) mode: every
   product (MatMul, BatchMatMulV2, Conv2D and their gradients) has T = the policy's compute
   dtype and every read of its result is a Cast to float32; nothing else computes in it
   (LayerNorm/GroupNorm, softmax, GELU/SiLU, the loss, the AdamW update are float32); variables
   and AdamW's slots are float32 after a step. fp32 graphs hold no reduced dtype. In eager mode
   a layer's output is the reduced product's, bit for bit, and the eager forward equals the
   probed graph's.
2. The probe fails a wrong model: a LayerNorm, softmax or bias add in bf16, an fp32 graph.

`python -m tests.test_precision_tensorflow [modes...]` prints the measured errors
(docs/measurements/bf16-tensorflow.txt).
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from tests.support.helpers import INSTALLED

pytestmark = pytest.mark.skipif("tensorflow" not in INSTALLED, reason="needs tensorflow")

if "tensorflow" in INSTALLED:
    import tensorflow as tf

    from frameworks.tensorflow import diffusion as tdiff
    from frameworks.tensorflow import gpt as tgpt
    from frameworks.tensorflow import precision as tprec

from tests import test_diffusion_equivalence as TD  # noqa: E402
from tests import test_gpt_equivalence as TG  # noqa: E402
from tests.support import precision_checks as PC  # noqa: E402
from workloads import gpt  # noqa: E402
from workloads.base import rel_err  # noqa: E402
from workloads.precision import POLICIES  # noqa: E402

REDUCED = PC.tested_precisions("tensorflow")


class TestTensorflow(PC.PrecisionChecks):
    framework = "tensorflow"
    modes = ("eager", "graph", "compiled")
    train_mode = "graph"
    train_params = "o1"          # the equivalence tests' O(1) weights
    train_batch = 8
    train_batches = 5

    def diffusion_grad_reference(self) -> dict[str, np.ndarray]:
        """The UNet has no float64 gradient per tensor here: per tensor it is checked against
        TF's fp32 eager gradients, which the fp32 suite holds to float64 differences (<= 1e-4),
        and as directional derivatives against float64 differences per block (grad_fd)."""
        fp32 = build("diffusion", "eager", "fp32")
        return {k: g.numpy() for k, g in fp32.grads(*map(arr, (TD.X0, TD.T, TD.NOISE))).items()}


CHECKS = TestTensorflow()


def build(workload: str, mode: str, precision: str, params: dict[str, np.ndarray] | None = None):
    return CHECKS.build(workload, mode, precision, params)[1]


def arr(a: np.ndarray):
    return tf.constant(a)


# ----------------------------------------------------------------------------- 1. the dtype probe

PRODUCTS = {"MatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D", "Conv2DBackpropInput",
            "Conv2DBackpropFilter", "_FusedMatMul", "Einsum"}
SHAPES = {"Shape", "ShapeN"}   # read a tensor's shape only (Conv2D's gradient takes its inputs')


def program_nodes(concrete) -> list[list]:
    """Every NodeDef of a traced program, one list per scope: the graph's, then each function
    of its library's (while-loop bodies and conditions, nested functions)."""
    gd = concrete.graph.as_graph_def()
    return [list(gd.node)] + [list(f.node_def) for f in gd.library.function]


def node_dtypes(node) -> set:
    out = set()
    for v in node.attr.values():
        kind = v.WhichOneof("value")
        if kind == "type":
            out.add(tf.as_dtype(v.type))
        elif kind == "list":
            out |= {tf.as_dtype(t) for t in v.list.type}
    return out


def _source(inp: str) -> str | None:
    """The producing node's name of a data input ('n', 'n:1', 'n:output:0'); None: control."""
    return None if inp.startswith("^") else inp.split(":")[0]


def policy_violations(scopes: list[list], precision: str, float32_ops: tuple[str, ...] = ()) -> list[str]:
    """What in a program (program_nodes) breaks the policy `precision` (empty: nothing).

    A reduced policy: every product has T = its compute dtype, every op that reads a product's
    result is a Cast to float32, the only other ops touching the compute dtype are Casts and
    shape reads, and the ops `float32_ops` (norms, softmax, loss, optimizer) are present and
    float32 only. fp32: no reduced dtype anywhere, products float32, `float32_ops` present and
    float32."""
    bad: list[str] = []
    nodes = [n for scope in scopes for n in scope]
    products = [n for n in nodes if n.op in PRODUCTS]
    if not products:
        bad.append("no matrix product or convolution in the program")
    want = tf.as_dtype(POLICIES[precision].compute)
    reduced = {tf.as_dtype(p.compute) for p in POLICIES.values()} - {tf.float32}
    for n in products:
        if tf.as_dtype(n.attr["T"].type) != want:
            bad.append(f"{n.op} {n.name} has T={tf.as_dtype(n.attr['T'].type).name}, not {want.name}")
    for n in nodes:
        allowed = want != tf.float32 and (n.op in PRODUCTS | SHAPES or n.op == "Cast")
        for d in sorted(reduced & node_dtypes(n), key=str) if not allowed else ():
            bad.append(f"{n.op} {n.name} computes in {d.name}")
    for scope in scopes if want != tf.float32 else ():
        product_names = {n.name for n in scope if n.op in PRODUCTS}   # node names: unique per scope
        for n in scope:
            for src in filter(None, map(_source, n.input)):
                if src in product_names and not (
                        (n.op == "Cast" and tf.as_dtype(n.attr["DstT"].type) == tf.float32) or n.op in SHAPES):
                    bad.append(f"{n.op} {n.name} reads the {precision} result of {src} (not a Cast to float32)")
    for op in float32_ops:
        found = [n for n in nodes if n.op == op]
        if not found:
            bad.append(f"no {op} in the program")
        bad += [f"{op} {n.name} is not float32 ({sorted(d.name for d in node_dtypes(n))})"
                for n in found if tf.float32 not in node_dtypes(n)
                or not node_dtypes(n) <= {tf.float32, tf.int32, tf.int64, tf.resource}]
    return bad


GPT_FWD = ("Mean", "Rsqrt", "Softmax", "Tanh", "ResourceGather")     # LayerNorm, attention, GELU, wte
GPT_LOSS = GPT_FWD + ("SparseSoftmaxCrossEntropyWithLogits",)
GPT_GRADS = GPT_LOSS + ("RsqrtGrad", "TanhGrad")
ADAMW = ("Sqrt", "AssignVariableOp", "AssignSubVariableOp")      # AdamW's m, v and p updates
UNET_FWD = ("Mean", "SquaredDifference", "Rsqrt", "Softmax", "Sigmoid", "Sin", "Cos")  # GN, attention, SiLU, temb
UNET_GRADS = UNET_FWD + ("RsqrtGrad",)


def gpt_programs(m) -> dict[str, tuple[Any, tuple[str, ...]]]:
    tok, tgt = arr(TG.TOKENS), arr(TG.TARGETS)
    return {"logits": (m._logits.get_concrete_function(tok), GPT_FWD),
            "loss": (m._loss.get_concrete_function(tok, tgt), GPT_LOSS),
            "grads": (m._grads.get_concrete_function(tok, tgt), GPT_GRADS),
            "train_step": (m._train_step.get_concrete_function(tok, tgt), GPT_GRADS + ADAMW),
            "generate": (m._generate_cached.get_concrete_function(arr(TG.PROMPT), tf.constant(TG.N_NEW)),
                         GPT_FWD + ("While",))}


def unet_programs(m) -> dict[str, tuple[Any, tuple[str, ...]]]:
    x0, t, noise = arr(TD.X0), arr(TD.T), arr(TD.NOISE)
    return {"eps": (m._eps.get_concrete_function(arr(TD.X_NOISY), t), UNET_FWD),
            "loss": (m._loss.get_concrete_function(x0, t, noise), UNET_FWD),
            "grads": (m._grads.get_concrete_function(x0, t, noise), UNET_GRADS),
            "train_step": (m._train_step.get_concrete_function(x0, t, noise), UNET_GRADS + ADAMW),
            "sample_ddim": (m._sample.get_concrete_function(), UNET_FWD + ("While",)),
            "sample_ddpm": (m._sample_noisy.get_concrete_function(), UNET_FWD + ("While",))}


PROGRAMS = {"gpt": gpt_programs, "diffusion": unet_programs}


@pytest.mark.parametrize("mode", ["graph", "compiled"])
@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
@pytest.mark.parametrize("precision", REDUCED)
def test_reduced_programs_run_products_reduced_and_everything_else_in_float32(precision, workload, mode):
    """Traces only (a compiled mode's tf.function is traced, not XLA-compiled, by
    get_concrete_function): the graph XLA is given is the one probed."""
    m = build(workload, mode, precision)
    for name, (concrete, float32_ops) in PROGRAMS[workload](m).items():
        scopes = program_nodes(concrete)
        assert policy_violations(scopes, precision, float32_ops) == [], name
        assert sum(n.op in PRODUCTS for scope in scopes for n in scope) >= 4, name
        if "While" in float32_ops:   # the loop body's products (decode step, UNet) were probed
            assert any(n.op in PRODUCTS for scope in scopes[1:] for n in scope), name


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_fp32_programs_hold_no_reduced_dtype(workload):
    m = build(workload, "graph", "fp32")
    for name, (concrete, float32_ops) in PROGRAMS[workload](m).items():
        assert policy_violations(program_nodes(concrete), "fp32", float32_ops) == [], name


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
@pytest.mark.parametrize("precision", REDUCED)
def test_variables_and_adamw_state_stay_float32_after_a_reduced_step(precision, workload):
    m = build(workload, "graph", precision)
    batch = (TG.TOKENS, TG.TARGETS) if workload == "gpt" else (TD.X0, TD.T, TD.NOISE)
    loss = m.train_step(*map(arr, batch))
    assert loss.dtype == tf.float32 and np.isfinite(loss.numpy())
    grads = m.grads(*map(arr, batch))
    assert all(g.dtype == tf.float32 for g in grads.values())
    state = list(m.net.named.values()) + m.optimizer.m + m.optimizer.v
    assert all(v.dtype == tf.float32 for v in state)
    assert m.optimizer.step.numpy() == 1
    for p, before in zip(m.net.named.values(), m.export_params().values()):
        assert p.numpy().dtype == np.float32 and before.dtype == np.float32


@pytest.mark.parametrize("precision", REDUCED)
def test_eager_reduced_layers_compute_the_reduced_product_and_match_the_probed_graph(precision):
    """Eager mode runs the same ops: a linear layer's output is float32 and equal, bit for bit,
    to the reduced product of rounded inputs plus the float32 bias (and not to the fp32
    layer's); the eager logits equal the graph-mode logits of the probed program."""
    eager = build("gpt", "eager", precision)
    layer = eager.net.h[0].mlp.c_fc
    low = tf.as_dtype(POLICIES[precision].compute)
    assert layer.compute == low == tprec.COMPUTE[precision]
    x = tf.random.stateless_normal((8, TG.CFG.n_embd), seed=(1, 2))
    y = layer(x)
    bf = lambda a: tf.cast(a, low)  # noqa: E731
    want = tf.cast(tf.matmul(bf(x), bf(layer.weight)), tf.float32) + layer.bias
    assert y.dtype == tf.float32
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    assert not np.array_equal(y.numpy(), (tf.matmul(x, layer.weight) + layer.bias).numpy())
    hidden, kv = eager.net.hidden(arr(TG.TOKENS))
    assert hidden.dtype == tf.float32 and all(k.dtype == v.dtype == tf.float32 for k, v in kv)
    logits = eager.logits(arr(TG.TOKENS)).numpy()
    graph = build("gpt", "graph", precision).logits(arr(TG.TOKENS)).numpy()
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, graph, rtol=0, atol=1e-5 * np.abs(graph).max())
    fp32 = build("gpt", "eager", "fp32").logits(arr(TG.TOKENS)).numpy()
    assert rel_err(logits, fp32) > 1e-4   # the policy really ran: the logits moved off fp32's


@pytest.mark.slow
@pytest.mark.parametrize("precision", REDUCED)
def test_xla_keeps_the_reduced_roundings_of_the_probed_graph(precision):
    """The compiled (XLA) logits are the eager bf16 logits to float32 rounding, 1e-2 away from
    fp32's: XLA on a CPU runs the dot in float32 but keeps the converts to and from bf16 (it
    does not simplify convert(convert(x, bf16), f32) away). Measured: 1e-9 apart; bf16 to
    fp32 1.4e-2."""
    tok = arr(TG.TOKENS)
    compiled = build("gpt", "compiled", precision).logits(tok).numpy()
    eager = build("gpt", "eager", precision).logits(tok).numpy()
    fp32 = build("gpt", "eager", "fp32").logits(tok).numpy()
    assert rel_err(compiled, eager) <= 1e-5 and rel_err(eager, fp32) >= 1e-3


# ----------------------------------------------------------------------------- 2. a wrong model fails

def _bf16_layer_norm(x, w, b):
    c = lambda a: tf.cast(a, tf.bfloat16)  # noqa: E731
    mean = tf.reduce_mean(c(x), axis=-1, keepdims=True)
    var = tf.reduce_mean(tf.square(c(x) - mean), axis=-1, keepdims=True)
    return tf.cast((c(x) - mean) * tf.math.rsqrt(var + tf.cast(gpt.LN_EPS, tf.bfloat16)) * c(w) + c(b), tf.float32)


def _bf16_out_matmul(a, b, compute=None, **kwargs):
    """Products in bf16 whose result is read in bf16 (the bias added in bf16)."""
    c = lambda z: tf.cast(z, tf.bfloat16)  # noqa: E731
    return tf.cast(tf.matmul(c(a), c(b), **kwargs) + tf.zeros((), tf.bfloat16), tf.float32)


def _bf16_softmax_attention(q, k, v, scale, compute=None, mask=None):
    c = lambda z: tf.cast(z, tf.bfloat16)  # noqa: E731
    att = tf.matmul(c(q), c(k), transpose_b=True) * tf.cast(scale, tf.bfloat16)
    att = tf.nn.softmax(tf.where(mask, att, tf.cast(float("-inf"), tf.bfloat16)), axis=-1)
    return tf.cast(tf.matmul(att, c(v)), tf.float32)


@pytest.mark.parametrize("patch,expect", [
    (("layer_norm", _bf16_layer_norm), "Rsqrt"),
    (("attention", _bf16_softmax_attention), "Softmax"),
    (("matmul", _bf16_out_matmul), "reads the bf16 result"),
], ids=["layer_norm_in_bf16", "softmax_in_bf16", "product_read_in_bf16"])
def test_the_probe_reports_a_gpt_that_breaks_the_policy(patch, expect, monkeypatch):
    monkeypatch.setattr(tgpt, *patch)
    m = build("gpt", "graph", "bf16")
    concrete, float32_ops = gpt_programs(m)["loss"]
    bad = policy_violations(program_nodes(concrete), "bf16", float32_ops)
    assert any(expect in b for b in bad), bad


def test_the_probe_reports_a_group_norm_in_bf16(monkeypatch):
    orig = tdiff.group_norm
    monkeypatch.setattr(tdiff, "group_norm", lambda x, w, b, g: tf.cast(
        orig(tf.cast(x, tf.bfloat16), tf.cast(w, tf.bfloat16), tf.cast(b, tf.bfloat16), g), tf.float32))
    concrete, float32_ops = unet_programs(build("diffusion", "graph", "bf16"))["eps"]
    bad = policy_violations(program_nodes(concrete), "bf16", float32_ops)
    assert any("SquaredDifference" in b for b in bad) and any("Rsqrt" in b for b in bad), bad


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
def test_the_probe_reports_an_fp32_program_labelled_bf16_and_the_reverse(workload):
    fp32, bf16 = (PROGRAMS[workload](build(workload, "graph", p))["grads"] for p in ("fp32", "bf16"))
    bad = policy_violations(program_nodes(fp32[0]), "bf16", fp32[1])
    assert any("not bfloat16" in b for b in bad), bad
    bad = policy_violations(program_nodes(bf16[0]), "fp32", bf16[1])
    assert any("computes in bfloat16" in b for b in bad), bad


if __name__ == "__main__":
    CHECKS.report(tuple(sys.argv[1:]) or None)
