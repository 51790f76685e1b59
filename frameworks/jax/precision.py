"""JAX's numeric policies (workloads/precision.py): its dtype table and the three roles a policy
touches, each taking the compute dtype as a parameter (a static argument of the model
functions, as a flax module's `dtype` is a parameter of the module, not a branch).

COMPUTE maps each policy to the dtype of the products' and convolutions' inputs. float32 is
the fp32 program unchanged (`a @ b`, lax.conv_general_dilated, jax.nn.dot_product_attention).
A reduced dtype enters only at the inputs of the products and leaves with their results: the
inputs are cast to it, the product accumulates and returns float32 (preferred_element_type),
and its backward is written out (a custom_vjp) so that the backward products, too, take
reduced operands (the float32 cotangent rounded to the dtype) and return float32: JAX's own
transpose of a bf16 product with a float32 result multiplies the float32 cotangent by the bf16
operand and rounds the parameter's gradient to bf16. jax.nn.dot_product_attention (XLA's) rounds
the softmax's probabilities to bf16 and returns p v in bf16, so at a reduced dtype the attention
is cuDNN's flash kernel on a CUDA GPU that compiles it (bf16 inputs, float32 accumulation and
softmax statistics) and written out elsewhere (written_attention): scores float32, masked
softmax float32 (attention_impl names the choice).

The roles (the same names in frameworks/torch/precision.py and frameworks/tensorflow/precision.py):
  matmul     the product a @ b (b transposed with transpose_b)
  attention  softmax(q k^T * scale, masked) v
  conv       the convolution of NHWC x with an HWIO kernel
"""
from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from workloads.base import is_accelerator

F32 = jnp.float32
COMPUTE = {"fp32": jnp.float32, "bf16": jnp.bfloat16}   # policy -> dtype of the products' inputs
PRECISIONS = tuple(COMPUTE)                               # the policies every JAX build honours
LOSS_SCALING = False                                      # no train step here applies a policy's loss_scale
DN = ("NHWC", "HWIO", "NHWC")


# ----------------------------------------------------------------------------- the product

def _product(out: str, x: tuple[str, jax.Array], y: tuple[str, jax.Array]) -> jax.Array:
    """einsum(x_spec, y_spec -> out) of two reduced-precision operands, float32 result; a
    batched one as one canonical lax.dot_general (batch, M, K) x (batch, K, N) between explicit
    transposes. XLA:CPU (jaxlib 0.10) has no BF16 x BF16 = F32 kernel of its own: such a product
    runs only where its XNNPACK fusion takes it, else fails at run time ("Unsupported element
    type for DotThunk"). jnp.einsum's batched key and value gradients of the attention failed
    under jit; the canonical form runs. For 2-D products it is the other way round (the weight
    gradient written canonically, with its transpose, fails; einsum's runs)."""
    (sx, a), (sy, b) = x, y
    batch = [i for i in sx if i in sy and i in out]
    if not batch:  # 2-D products (linear layers, the head) run as jnp.einsum writes them
        return jnp.einsum(f"{sx},{sy}->{out}", a, b, preferred_element_type=F32)
    contract = [i for i in sx if i in sy and i not in out]
    fx, fy = [i for i in sx if i not in sy], [i for i in sy if i not in sx]
    size = {**dict(zip(sx, a.shape)), **dict(zip(sy, b.shape))}
    n = lambda idx: int(np.prod([size[i] for i in idx], dtype=np.int64))  # noqa: E731
    a = a.transpose([sx.index(i) for i in batch + fx + contract]).reshape(n(batch), n(fx), n(contract))
    b = b.transpose([sy.index(i) for i in batch + contract + fy]).reshape(n(batch), n(contract), n(fy))
    r = lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), preferred_element_type=F32)  # (batch, M, N)
    r = r.reshape([size[i] for i in batch + fx + fy])
    return r.transpose([(batch + fx + fy).index(i) for i in out])


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def einsum(spec: str, compute: Any, a: jax.Array, b: jax.Array) -> jax.Array:
    """einsum(spec, a, b) of float32 a, b with inputs in the reduced dtype `compute`,
    accumulated and returned in float32. `spec` is "ab,bc->ac"-like: two operands, no index
    repeated within one, every index of an operand in the other operand or in the output (so
    both transposes are products of the same kind)."""
    return _einsum_fwd(spec, compute, a, b)[0]


def _einsum_fwd(spec: str, compute: Any, a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    (sa, sb), so = spec.split("->")[0].split(","), spec.split("->")[1]
    a16, b16 = a.astype(compute), b.astype(compute)
    return _product(so, (sa, a16), (sb, b16)), (a16, b16)


def _einsum_bwd(spec: str, compute: Any, res: tuple[jax.Array, jax.Array], g: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
    """The two transposes, each a reduced product with a float32 result: da = g b^T, db = a^T g."""
    a16, b16 = res
    (sa, sb), so = spec.split("->")[0].split(","), spec.split("->")[1]
    g16 = g.astype(compute)
    return _product(sa, (so, g16), (sb, b16)), _product(sb, (sa, a16), (so, g16))


einsum.defvjp(_einsum_fwd, _einsum_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def rows_gemm(a: jax.Array, b: jax.Array, transpose_b: bool) -> jax.Array:
    """a @ b (a @ b^T with transpose_b) of float32 rows a (N, in), whose weight gradient is one
    canonical GEMM, (in, N) x (N, out) (or (out, N) x (N, in) with transpose_b), its transposed
    operand written to memory first (an optimization_barrier keeps XLA from folding the transpose
    back into the dot). JAX's own transpose of `a @ b` contracts both operands over their row
    dimension (a "transposed-A" dot), which XLA:CPU (jaxlib 0.10, on the 2-core AMD EPYC of
    docs/measurements/peers-cpu-2core) runs outside its YNNPACK fusions at 122-170 GFLOP/s
    against 190-210 for the canonical form of the same shape; a transpose copy of the rows costs
    far less. Reverse mode only (a custom_vjp): the derivatives workload's forward-mode transforms
    use the plain product (matmul's default)."""
    return a @ b.T if transpose_b else a @ b


def _rows_gemm_fwd(a: jax.Array, b: jax.Array, transpose_b: bool) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    return rows_gemm(a, b, transpose_b), (a, b)


def _rows_gemm_bwd(transpose_b: bool, res: tuple[jax.Array, jax.Array], g: jax.Array) -> tuple[jax.Array, jax.Array]:
    a, b = res
    if transpose_b:     # y = a b^T, b (out, in): da = g b, db = g^T a
        return g @ b, lax.optimization_barrier(g.T) @ a
    return g @ b.T, lax.optimization_barrier(a.T) @ g      # y = a b: da = g b^T, db = a^T g


rows_gemm.defvjp(_rows_gemm_fwd, _rows_gemm_bwd)


def matmul(a: jax.Array, b: jax.Array, compute: Any = F32, transpose_b: bool = False,
           canonical_grad: bool = False) -> jax.Array:
    """a @ b (a @ b^T with transpose_b) of rows a (N, in) and b (in, out) (b (out, in)), the
    inputs in `compute`, the result float32. canonical_grad (float32 only): b's gradient as one
    canonical GEMM (rows_gemm), for reverse-mode programs on the CPU (frameworks/jax/gpt.py: Forms)."""
    if compute == F32:
        if canonical_grad:
            return rows_gemm(a, b, transpose_b)
        return a @ b.T if transpose_b else a @ b
    return einsum("nc,vc->nv" if transpose_b else "nc,cd->nd", compute, a, b)


# ----------------------------------------------------------------------------- the attention

def written_attention(q: jax.Array, k: jax.Array, v: jax.Array, scale: float, compute: Any,
                      mask: jax.Array | None = None, kv_layout: str = "bsnh") -> jax.Array:
    """softmax(q k^T * scale, masked) v written out: both products' inputs in `compute`, float32
    out; the scale, the mask and the softmax float32. q (B, T, nh, hs); k, v (B, S, nh, hs)
    (kv_layout "bsnh") or (B, nh, S, hs) ("bnsh"); mask broadcastable to (B, nh, T, S), True
    where a key is seen. Returns (B, T, nh, hs) float32. At float32 the two products are plain
    jnp.einsum (JAX's own transposes for the backward)."""
    def product(spec: str, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.einsum(spec, x, y) if compute == F32 else einsum(spec, compute, x, y)
    s = product(f"btnh,{kv_layout}->bnts", q, k) * scale                  # (B, nh, T, S)
    if mask is not None:
        s = jnp.where(mask, s, jnp.finfo(F32).min)
    return product(f"bnts,{kv_layout}->btnh", jax.nn.softmax(s, axis=-1), v)


# The attention JAX's layers run, by device and policy (attention_impl). float32:
# jax.nn.dot_product_attention with implementation=None (XLA's; cuDNN's flash kernel takes no
# float32 inputs). A reduced dtype on a CUDA GPU: cuDNN's flash attention
# (implementation='cudnn') on q, k, v in the dtype, where cuDNN is present and compiles the
# shape (cudnn_refusal); it keeps the policy as torch's SDPA does on CUDA: both products take
# the reduced inputs and accumulate in float32, the softmax and its statistics (the residual the
# backward reads) are float32; its output and the q, k, v gradients leave the kernel rounded to
# the dtype once (cast back to float32 at once), and its backward takes the float32 cotangent
# rounded to the dtype, as the written form's products do (jax/_src/cudnn/
# fused_attention_stablehlo.py: the softmax_stat is float32, the gradients have q's dtype). It
# is staged with lax.platform_dependent, so a program lowered for the CPU runs the written form.
# A reduced dtype elsewhere, or where cuDNN refuses: written out (written_attention). XLA's
# dot_product_attention at bf16 rounds the softmax's probabilities to bf16 and differentiates
# through JAX's own transposes (a float32 cotangent times a bf16 operand, rounding a gradient to
# bf16), which the policy's custom_vjp products avoid.
XLA_ATTENTION, CUDNN_ATTENTION, WRITTEN = ("jax.nn.dot_product_attention (XLA)", "jax.nn.dot_product_attention (cuDNN)",
                                           "written")
# The shape class of cuDNN's device check (attention_impl): causal, 128 tokens, one head of 64.
PROBE = ("causal", 128, 128, 1, 64)
# (dtype name, kind, T, S, heads, head dim) -> None where cuDNN's flash attention compiles it on
# this process's GPU (forward, and backward for the kinds a gradient takes), else why not.
_CUDNN: dict[tuple[Any, ...], str | None] = {}


def _cudnn_call(q: jax.Array, k: jax.Array, v: jax.Array, seen: jax.Array | None, scale: float,
                causal: bool) -> jax.Array:
    """cuDNN's flash attention of q (B, T, nh, hs), k, v (B, S, nh, hs), all in the reduced dtype;
    seen: None, or the number of keys each sequence sees (B,) int32. Returns float32."""
    return jax.nn.dot_product_attention(q, k, v, scale=scale, is_causal=causal, key_value_seq_lengths=seen,
                                        implementation="cudnn").astype(F32)


def _cudnn_probe(compute: Any, kind: str, T: int, S: int, nh: int, hs: int) -> str | None:
    """None where this process has a CUDA GPU whose cuDNN compiles the flash attention of the
    shape class (batch 1) at `compute`, its backward too for kinds a gradient takes ('causal',
    'full'); else the reason, in one line."""
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        return "no CUDA GPU in this process"
    if "cuda" not in getattr(gpu.client, "platform_version", "").lower():
        return f"not a CUDA GPU ({gpu.client.platform_version})"
    from jax.sharding import SingleDeviceSharding
    at = SingleDeviceSharding(gpu)
    q = jax.ShapeDtypeStruct((1, T, nh, hs), compute, sharding=at)
    kv = jax.ShapeDtypeStruct((1, S, nh, hs), compute, sharding=at)
    if kind == "decode":
        fn = partial(_cudnn_call, scale=1.0, causal=False)
        args = (q, kv, kv, jax.ShapeDtypeStruct((1,), jnp.int32, sharding=at))
    else:
        def fn(q: jax.Array, k: jax.Array, v: jax.Array) -> Any:
            return jax.grad(lambda *a: _cudnn_call(*a, None, 1.0, kind == "causal").sum(), (0, 1, 2))(q, k, v)
        args = (q, kv, kv)
    try:
        jax.jit(fn).lower(*args).compile()
    except Exception as e:  # noqa: BLE001  cuDNN absent, too old, or this shape unsupported: the reason
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else 'no message'}"[:300]
    return None


def cudnn_refusal(compute: Any, kind: str, T: int, S: int, nh: int, hs: int) -> str | None:
    """None where cuDNN's flash attention runs the shape class on this process's GPU at
    `compute` (one compile per class and process, cached), else why not (attention_impl says it)."""
    key = (jnp.dtype(compute).name, kind, T, S, nh, hs)
    if key not in _CUDNN:
        _CUDNN[key] = _cudnn_probe(compute, kind, T, S, nh, hs)
    return _CUDNN[key]


def attention_impl(device: str, precision: str) -> str:
    """The attention JAX's layers run on `device` ('cpu', 'gpu', 'cuda', 'cuda:0') at
    `precision`: XLA's at float32; at a reduced dtype cuDNN's on a GPU where cuDNN compiles it
    (its own check on a small causal shape), the written form with the reason where not, and
    the written form on any other device. A shape cuDNN refused in this process (a model's own
    head size, say) is named after it: those layers ran written out."""
    compute = COMPUTE[precision]
    if compute == F32:
        return XLA_ATTENTION
    if not is_accelerator(device):
        return WRITTEN
    why = cudnn_refusal(compute, *PROBE)
    if why is not None:
        return f"{WRITTEN} (cuDNN not used: {why})"
    name = jnp.dtype(compute).name
    refused = [f"{k[1]} T={k[2]} S={k[3]} heads={k[4]} head size={k[5]}: {r}"
               for k, r in _CUDNN.items() if k[0] == name and r is not None]
    return CUDNN_ATTENTION + (f"; {WRITTEN} where cuDNN refused ({'; '.join(refused)})" if refused else "")


def attention(q: jax.Array, k: jax.Array, v: jax.Array, scale: float, compute: Any = F32,
              causal: bool = False, pos: Any = None) -> jax.Array:
    """softmax(q k^T * scale, masked) v; q (B, T, nh, hs) (JAX's layout). k, v (B, S, nh, hs),
    every key seen, or with `causal` the causal mask; or, with `pos`, the decoding caches
    (B, nh, S, hs), keys 0..pos seen. float32: jax.nn.dot_product_attention; a reduced
    `compute`: cuDNN's on a CUDA GPU where it runs the shape, else written_attention
    (attention_impl). The scale comes from the caller (its module's attn_scale, which
    tests/test_mutations.py patches)."""
    if compute == F32:
        if pos is not None:
            seen = jnp.full((q.shape[0],), pos + 1, jnp.int32)             # keys 0..pos
            return jax.nn.dot_product_attention(q, k.swapaxes(1, 2), v.swapaxes(1, 2),
                                                key_value_seq_lengths=seen, scale=scale)
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    B, T, nh, hs = q.shape
    seen = None if pos is None else jnp.full((B,), pos + 1, jnp.int32)    # keys 0..pos

    def written(q: jax.Array, k: jax.Array, v: jax.Array, seen: jax.Array | None) -> jax.Array:
        if seen is not None:
            return written_attention(q, k, v, scale, compute, jnp.arange(k.shape[2]) < seen[0], kv_layout="bnsh")
        mask = jnp.tril(jnp.ones((T, T), bool)) if causal else None
        return written_attention(q, k, v, scale, compute, mask)

    S = k.shape[1 if pos is None else 2]
    kind = "decode" if pos is not None else "causal" if causal else "full"
    if cudnn_refusal(compute, kind, T, S, nh, hs) is not None:
        return written(q, k, v, seen)

    def cudnn(q: jax.Array, k: jax.Array, v: jax.Array, seen: jax.Array | None) -> jax.Array:
        if seen is not None:                                               # the caches' layout
            k, v = k.swapaxes(1, 2), v.swapaxes(1, 2)
        return _cudnn_call(q.astype(compute), k.astype(compute), v.astype(compute), seen, scale, causal)
    return lax.platform_dependent(q, k, v, seen, cuda=cudnn, default=written)


# ----------------------------------------------------------------------------- the convolution

@partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _conv(x: jax.Array, w: jax.Array, stride: int, pad: int, compute: Any) -> jax.Array:
    """conv's cross-correlation of float32 x (NHWC), w (HWIO) with inputs in the reduced dtype
    `compute`, accumulated and returned in float32; square kernel k, stride, zero padding `pad`
    on every side."""
    return _conv_fwd(x, w, stride, pad, compute)[0]


def _conv_fwd(x: jax.Array, w: jax.Array, stride: int, pad: int, compute: Any
              ) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    x16, w16 = x.astype(compute), w.astype(compute)
    y = lax.conv_general_dilated(x16, w16, window_strides=(stride, stride), padding=((pad, pad), (pad, pad)),
                                 dimension_numbers=DN, preferred_element_type=F32)
    return y, (x16, w16)


def _conv_bwd(stride: int, pad: int, compute: Any, res: tuple[jax.Array, jax.Array], g: jax.Array
              ) -> tuple[jax.Array, jax.Array]:
    """Both transposes as reduced convolutions with float32 results (g rounded to `compute`):
    dx = g (dilated by the stride) correlated with the flipped kernel, in and out swapped;
    dw[kh, kw, i, o] = sum over b, y, x of x_pad[b, s y + kh, s x + kw, i] g[b, y, x, o], a
    correlation of x (batch and channels swapped) with g dilated by the stride."""
    x16, w16 = res
    g16 = g.astype(compute)
    k, s = w16.shape[0], stride
    (H, Wd), (Ho, Wo) = x16.shape[1:3], g16.shape[1:3]
    lo = k - 1 - pad
    dx = lax.conv_general_dilated(g16, jnp.flip(w16, (0, 1)), window_strides=(1, 1),
                                  padding=((lo, H + k - 2 - (Ho - 1) * s - lo), (lo, Wd + k - 2 - (Wo - 1) * s - lo)),
                                  lhs_dilation=(s, s), dimension_numbers=("NHWC", "HWOI", "NHWC"),
                                  preferred_element_type=F32)
    dw = lax.conv_general_dilated(x16, g16, window_strides=(1, 1),
                                  padding=((pad, k + (Ho - 1) * s - H - pad), (pad, k + (Wo - 1) * s - Wd - pad)),
                                  rhs_dilation=(s, s), dimension_numbers=("CHWN", "IHWO", "HWNC"),
                                  preferred_element_type=F32)
    return dx, dw


_conv.defvjp(_conv_fwd, _conv_bwd)


def conv(x: jax.Array, w: jax.Array, stride: int, pad: int, compute: Any = F32) -> jax.Array:
    """Cross-correlation of NHWC x with the HWIO kernel w, zero padding `pad` on every side,
    the inputs in `compute`, the result float32."""
    if compute == F32:
        return lax.conv_general_dilated(x, w, window_strides=(stride, stride), padding=((pad, pad), (pad, pad)),
                                        dimension_numbers=DN)
    return _conv(x, w, stride, pad, compute)
