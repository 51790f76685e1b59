"""Numeric policies of a case (`Case.precision`, `--precision`), one definition for all three
frameworks. Framework-free.

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

Every policy is one entry of POLICIES below: its compute dtype (the dtype of the products' and
convolutions' inputs, by its numpy/ml_dtypes name), its mantissa bits, its loss-scaling rule,
the CPU instructions that multiply it natively, and its one-line statement. A framework maps
each compute dtype to its own in one table (frameworks/<fw>/precision.py: COMPUTE), which its
layers take as their `compute` parameter; its workload modules declare the policies their
builds honour (PRECISIONS, derived from that table; a case asking for another is refused with
the reason, never run at the wrong precision). tests/test_conformance.py fails a framework that
declares a policy its table lacks or whose layers do not compute at it; tests/support/precision_checks.py
holds each policy's tolerances and the checks every framework runs (a probe of the dtypes its
programs actually use: products' inputs in the compute dtype; norms, softmax, loss and
optimizer float32; and equivalence against the float64 reference at the policy's tolerances).

On a CPU without the policy's native instructions (bf16: AVX512-BF16 or AMX-BF16; every policy's
`native` flags are recorded, with CONTEXT_FLAGS, in every run's machine_info.cpu_flags: cpu_flags())
a reduced-precision product is emulated and can run 44-499x slower than fp32 (pytorch#146508):
the report states no speed finding for that policy there.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    compute: str                 # the dtype of products' and convolutions' inputs (numpy / ml_dtypes name)
    mantissa_bits: int           # of `compute`: its unit roundoff is 2 ** -(mantissa_bits + 1)
    loss_scale: float | None     # the loss-scaling rule: None (no scaling), or the static factor the loss
                                 # is multiplied by before the backward pass and the gradients divided by
    native: tuple[str, ...]      # CPU flags under which a `compute` product is native, any one of them
                                 # (without one it is emulated: no speed finding); () for float32
    statement: str               # the policy in one line, as every record states it (precision_policy)

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -(self.mantissa_bits + 1)


# The numeric policies, the default first. A new one (fp16) is its line here, its dtype in each
# framework's COMPUTE table and its tolerances in tests/support/precision_checks.py (CONTRIBUTING.md).
POLICIES: dict[str, Policy] = {
    "fp32": Policy("float32", 23, None, (), "every tensor and operation float32, matmul precision highest"),
    "bf16": Policy("bfloat16", 7, None, ("avx512_bf16", "amx_bf16"),
                   "products' and convolutions' inputs bfloat16, results float32; norms, softmax, activations, "
                   "loss, parameters, gradients and optimizer float32; no loss scaling"),
}
PRECISIONS = tuple(POLICIES)        # their names (workloads.case.PRECISIONS)
DEFAULT = PRECISIONS[0]
POLICY = {name: p.statement for name, p in POLICIES.items()}   # each policy in one line
PARAM_DTYPE = "float32"             # parameters, gradients, optimizer state, inputs and outputs: every policy


# CPU flags recorded beside every policy's `native` ones, for context: AVX512F (the 512-bit base) and
# the tile and VNNI units a reduced-precision kernel may use.
CONTEXT_FLAGS = ("avx512f", "amx_tile", "avx_vnni")


def cpu_flags() -> tuple[str, ...]:
    """The CPU flags every run records (machine_info.cpu_flags): CONTEXT_FLAGS, then each policy's
    native instructions, read from POLICIES when asked (a new policy's are recorded with no other edit)."""
    return tuple(dict.fromkeys((*CONTEXT_FLAGS, *(f for p in POLICIES.values() for f in p.native))))


def reduced() -> tuple[str, ...]:
    """The policies other than the default, in POLICIES' order: what the precision section compares."""
    return tuple(p for p in POLICIES if p != DEFAULT)


def native(precision: str, cpu_flags: list[str] | None) -> bool | None:
    """Whether the CPU runs `precision`'s products natively (None: its flags were not read)."""
    if cpu_flags is None:
        return None
    flags = POLICIES[precision].native
    return not flags or any(f in cpu_flags for f in flags)


def native_words(precision: str) -> str:
    """The instructions of `precision` as the report names them: 'AVX512-BF16 or AMX-BF16'."""
    return " or ".join(f.upper().replace("_", "-") for f in POLICIES[precision].native)


def peak_kind(precision: str, matmul_precision: str | None, device: str | None) -> str:
    """The precision a case's products run at, as GEMM peaks name it: bf16, fp32, or tf32 (fp32
    cases on an accelerator at --matmul-precision tf32; a CPU has no TF32). The key of the
    GEMM rate that utilisation and MFU divide by (frameworks/harness/gemm.py, reports)."""
    if precision == "fp32" and matmul_precision == "tf32" and device not in (None, "cpu"):
        return "tf32"
    return precision
