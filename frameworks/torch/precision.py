"""torch's numeric policies (workloads/precision.py): its dtype table and the three roles a
policy touches, each taking the layer's compute dtype as a parameter.

COMPUTE maps each policy to torch's dtype of the products' and convolutions' inputs. A layer
holds it as `compute` (set_compute, from the model's precision) and reads it on every call:
float32 is the layer as torch writes it (nn.Linear, nn.Conv2d, the fused SDPA); a reduced
dtype casts the inputs of the product to it, multiplies, casts the result back to float32 and
adds the float32 bias. Torch's CPU matmul returns bf16 for bf16 inputs (it accumulates in
float32; no float32 out_dtype on the CPU), so the product is rounded to bf16 once before the
cast back. torch.autocast is not used (on the CPU it runs layer_norm and softmax in bf16).

The roles (the same names in frameworks/jax/precision.py and frameworks/tensorflow/precision.py):
  matmul     the product a @ b
  attention  softmax(q k^T * scale, masked) v: the fused SDPA at float32, and at a reduced dtype
             on CUDA (its flash, cuDNN and memory-efficient kernels take the reduced inputs and
             keep float32 accumulation and softmax statistics); written out on the CPU at a
             reduced dtype (scores and softmax float32), the one form the bf16 dtype probe can
             check (attention_impl decides; the record's attention_impl names it)
  conv       the convolution of an nn.Conv2d layer (Conv2d calls it); Linear is the product's
             layer
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F

F32 = torch.float32
COMPUTE = {"fp32": F32, "bf16": torch.bfloat16}   # policy -> dtype of the products' inputs
POLICY_OF = {dtype: name for name, dtype in COMPUTE.items()}   # dtype -> policy
PRECISIONS = tuple(COMPUTE)                         # the policies every torch build honours
LOSS_SCALING = False                                # no train step here applies a policy's loss_scale


def matmul(a: torch.Tensor, b: torch.Tensor, compute: torch.dtype = F32) -> torch.Tensor:
    """a @ b with both inputs in `compute`, the product returned in float32."""
    if compute == F32:
        return torch.matmul(a, b)
    return torch.matmul(a.to(compute), b.to(compute)).float()


def written_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                      scale: float, compute: torch.dtype) -> torch.Tensor:
    """softmax(q k^T * scale, masked) v written out, the products' inputs in `compute` and
    everything else in float32; q (B, nh, T, hs), k and v (B, nh, L, hs), mask None or
    broadcastable to (B, nh, T, L), True = attend."""
    att = matmul(q, k.transpose(-2, -1), compute) * scale   # (B, nh, T, L) float32
    if mask is not None:
        att = att.masked_fill(~mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    return matmul(att, v, compute)                                          # (B, nh, T, hs) float32


# (device type, precision) -> the attention a layer runs; ATTENTION_IMPL[...] and its reason.
# On the CPU at bf16 the fused kernel (_scaled_dot_product_flash_attention_for_cpu) hides its
# softmax from the dtype probe (tests/test_precision_torch.py), so the written-out form stays there.
SDPA, WRITTEN = "sdpa", "written"


def attention_impl(device: str, precision: str) -> str:
    """The attention torch's layers run on `device` ('cpu', 'cuda', 'cuda:0') at `precision`:
    'sdpa' (F.scaled_dot_product_attention, with the policy's inputs) at float32 everywhere and
    at a reduced dtype on CUDA; 'written' (written_attention) at a reduced dtype elsewhere."""
    if COMPUTE[precision] == F32 or device.split(":")[0] == "cuda":
        return SDPA
    return WRITTEN


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, compute: torch.dtype = F32,
              mask: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v; q (B, nh, T, hs), k, v (B, nh, L, hs); mask None or
    broadcastable to (B, nh, T, L), True = attend; causal: the causal mask (T = L). The scale
    comes from the caller (its module's attn_scale, which tests/test_mutations.py patches)."""
    if compute == F32:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    if attention_impl(q.device.type, POLICY_OF[compute]) == SDPA:   # bf16 in, float32 statistics inside
        return F.scaled_dot_product_attention(q.to(compute), k.to(compute), v.to(compute), attn_mask=mask,
                                              is_causal=causal, scale=scale).float()
    if causal:
        T = q.size(2)
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()    # True = attend
    return written_attention(q, k, v, mask, scale, compute)


def conv(m: nn.Conv2d, x: torch.Tensor, compute: torch.dtype = F32) -> torch.Tensor:
    """The convolution of the layer m (its weight, bias, stride, padding) applied to x, its
    inputs in `compute`: float32 is nn.Conv2d itself; a reduced dtype casts x and the weight,
    casts the result back to float32 and adds the float32 bias."""
    if compute == F32:
        return nn.Conv2d.forward(m, x)
    return m._conv_forward(x.to(compute), m.weight.to(compute), None).float() + m.bias[:, None, None]


class Linear(nn.Linear):
    """nn.Linear with the product's inputs in `compute`: at a reduced dtype, x W^T on inputs cast
    to it, the product cast back to float32 before the float32 bias is added."""
    compute: torch.dtype = F32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.compute == F32:
            return super().forward(x)
        y = F.linear(x.to(self.compute), self.weight.to(self.compute)).float()
        return y if self.bias is None else y + self.bias


class Conv2d(nn.Conv2d):
    """nn.Conv2d computing in `compute` (see conv)."""
    compute: torch.dtype = F32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv(self, x, self.compute)


def set_compute(net: nn.Module, precision: str) -> None:
    """Give every module with a `compute` (Linear, Conv2d, the attention modules) the policy's
    dtype of the products' inputs, COMPUTE[precision]."""
    for m in net.modules():
        if hasattr(m, "compute"):
            m.compute = COMPUTE[precision]
