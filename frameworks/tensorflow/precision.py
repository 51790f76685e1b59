"""TensorFlow's numeric policies (workloads/precision.py): its dtype table and the three roles a
policy touches, each taking the layer's compute dtype as a parameter.

COMPUTE maps each policy to the dtype of the products' and convolutions' inputs; every layer
holds it as `compute`. float32 is TF's own op itself (tf.matmul, tf.nn.conv2d), the fp32 graph
unchanged; bfloat16 casts the product's two inputs to bfloat16 and its result back to float32
before anything else reads it. Not a Keras policy (Keras' mixed_bfloat16 runs softmax and
norms in bf16 where the layer does not opt out). On a CPU, TF's bf16 MatMul rounds its result
to bf16 (oneDNN accumulates in float32); XLA on a CPU computes the dot in float32 from the
bf16-rounded inputs and rounds the result to bf16 as the graph says.

The roles (the same names in frameworks/torch/precision.py and frameworks/jax/precision.py):
  matmul     the product a @ b (tf.matmul's keywords: transpose_b, ...)
  attention  softmax(q k^T * scale, masked) v, written out (TF has no fused attention op; XLA
             fuses the scale, mask and softmax): the products' inputs in `compute`, scale, mask
             and softmax float32
  conv       the convolution tf.nn.conv2d
"""
from __future__ import annotations

import tensorflow as tf

F32 = tf.float32
COMPUTE = {"fp32": tf.float32, "bf16": tf.bfloat16}   # policy -> dtype of the products' inputs
PRECISIONS = tuple(COMPUTE)                             # the policies every TensorFlow build honours
LOSS_SCALING = False                                    # no train step here applies a policy's loss_scale


def matmul(a, b, compute=F32, **kwargs):
    """tf.matmul(a, b, **kwargs) with its inputs in `compute`: float32 is tf.matmul itself; a
    reduced dtype casts a and b to it and the product back to float32."""
    if compute == F32:
        return tf.matmul(a, b, **kwargs)
    return tf.cast(tf.matmul(tf.cast(a, compute), tf.cast(b, compute), **kwargs), F32)


def attention_impl(device: str, precision: str) -> str:
    """The attention TensorFlow's layers run: written out on every device at every policy."""
    COMPUTE[precision]   # a policy TensorFlow lacks is a KeyError, as in the other frameworks
    return "written"


def attention(q, k, v, scale, compute=F32, mask=None):
    """softmax(q k^T * scale, keys masked where mask (T, Tk) is False) v; q (..., T, hs), k, v
    (..., Tk, hs). The scale comes from the caller (its module's attn_scale, which
    tests/test_mutations.py patches)."""
    att = matmul(q, k, compute, transpose_b=True) * scale                # (..., T, Tk)
    if mask is not None:
        att = tf.where(mask, att, float("-inf"))
    return matmul(tf.nn.softmax(att, axis=-1), v, compute)               # (..., T, hs)


def conv(x, w, compute=F32, **kwargs):
    """tf.nn.conv2d(x, w, **kwargs) with its inputs in `compute` (matmul's rule)."""
    if compute == F32:
        return tf.nn.conv2d(x, w, **kwargs)
    return tf.cast(tf.nn.conv2d(tf.cast(x, compute), tf.cast(w, compute), **kwargs), F32)
