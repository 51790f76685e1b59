"""Numeric policies of a case (`Case.precision`, `--precision`), one definition for all three
frameworks (issue 20). Framework-free.

fp32   every tensor and every operation in float32 (matmul precision `highest`: no TF32).

bf16   mixed precision, one explicit policy in every framework, because their defaults differ
       (torch's CPU autocast runs layer_norm and softmax in bf16, its CUDA autocast keeps them in
       fp32; JAX has no autocast; Keras has policies of its own):
         - parameters, gradients and the optimizer's state (AdamW's m, v, step) are float32, and
           the update is computed in float32; no loss scaling (bf16 has float32's range);
         - the inputs of every matrix product and convolution (linear layers, the attention's
           q k^T and p v, the tied output head, the UNet's convolutions and its attention) are
           cast to bfloat16, the product accumulates in float32 where the framework lets it and
           its result is float32 before anything else reads it;
         - everything else runs in float32: embeddings' gather and additions, LayerNorm and
           GroupNorm, softmax (the attention's included: scores leave the product as float32),
           GELU/SiLU, the loss, the sampler's arithmetic.
       A framework whose fused attention cannot keep this (its softmax sees bf16) writes the
       attention out for bf16 cases; the report says where a framework's bf16 path differs
       from its fp32 fast path.

A framework implements a policy in its workload module (frameworks/<fw>/<workload>.py
declares PRECISIONS, the policies its build honours; a case asking for another is refused
with the reason, never run at the wrong precision) and tests it twice: a probe of the dtypes
its programs actually use (dot inputs bf16; norms, softmax, loss and optimizer float32), and
equivalence against the float64 reference at tolerances measured for bf16.

On a CPU without AVX512-BF16 or AMX-BF16 (frameworks.harness.machine.BF16_FLAGS, in every run's
machine_info.cpu_flags) a bf16 product is emulated and can run 44-499x slower than fp32
(pytorch#146508): the report states no bf16 speed finding there.
"""
from __future__ import annotations

# Each policy in one line, as every record states it (precision_policy).
POLICY = {
    "fp32": "every tensor and operation float32, matmul precision highest",
    "bf16": "products' and convolutions' inputs bfloat16, results float32; norms, softmax, activations, loss, "
            "parameters, gradients and optimizer float32; no loss scaling",
}
# The CPU instructions without which bf16 is emulated (a speed finding needs one of them).
BF16_NATIVE = ("avx512_bf16", "amx_bf16")


def native_bf16(cpu_flags: list[str] | None) -> bool | None:
    """Whether the CPU runs bf16 products natively (None: its flags were not read)."""
    if cpu_flags is None:
        return None
    return any(f in cpu_flags for f in BF16_NATIVE)
