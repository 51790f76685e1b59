"""The DDPM peer: diffusers' UNet2DModel configured as the DDPM CIFAR-10 UNet (the block types,
widths, attention resolutions, GroupNorm groups and epsilon of fwbench's DiffusionConfig), with
fwbench's numpy weights copied in, in PyTorch. diffusers has no Flax or TensorFlow UNet2DModel,
so JAX's and TensorFlow's DDPM have no peer here (a row with that reason).

The mapping (fwbench's names follow the pytorch_diffusion port of the DDPM checkpoints):
  temb.dense.{0,1}                  time_embedding.linear_{1,2}
  down.i.block.j.{norm1,conv1,temb_proj,norm2,conv2,nin_shortcut}
                                    down_blocks.i.resnets.j.{norm1,conv1,time_emb_proj,norm2,conv2,conv_shortcut}
  down.i.attn.j.{norm,q,k,v,proj_out}
                                    down_blocks.i.attentions.j.{group_norm,to_q,to_k,to_v,to_out.0}
  down.i.downsample.conv            down_blocks.i.downsamplers.0.conv
  mid.block_1 / attn_1 / block_2    mid_block.resnets.0 / attentions.0 / resnets.1
  up.i.*                            up_blocks.(L-1-i).* (diffusers numbers the up path from the bottom)
  up.i.upsample.conv                up_blocks.(L-1-i).upsamplers.0.conv
  norm_out, conv_out                conv_norm_out, conv_out
Convolutions HWIO -> OIHW; dense (in, out) -> (out, in); the attention's 1x1 convolutions
become diffusers' Linear layers ((1, 1, C, C) -> (C, C) transposed).

Train step: Algorithm 1 (x_t from x0, t and noise; mean squared error of the predicted noise),
backward, clip_grad_norm_, torch.optim.AdamW (fused; weight decay 0, as the workload's).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from frameworks.peers.gpt import torch_train_side
from frameworks.peers.timing import Side
from workloads import diffusion as D
from workloads.base import FwbenchError, Unsupported

LIBRARY = {"torch": "diffusers UNet2DModel"}

_RENAMES = [(r"^temb\.dense\.0\.", "time_embedding.linear_1."), (r"^temb\.dense\.1\.", "time_embedding.linear_2."),
            (r"\.temb_proj\.", ".time_emb_proj."), (r"\.nin_shortcut\.", ".conv_shortcut."),
            (r"\.norm\.", ".group_norm."), (r"\.q\.", ".to_q."), (r"\.k\.", ".to_k."), (r"\.v\.", ".to_v."),
            (r"\.proj_out\.", ".to_out.0."), (r"\.downsample\.conv\.", ".downsamplers.0.conv."),
            (r"\.upsample\.conv\.", ".upsamplers.0.conv."), (r"^norm_out\.", "conv_norm_out."),
            (r"^mid\.block_1\.", "mid_block.resnets.0."), (r"^mid\.block_2\.", "mid_block.resnets.1."),
            (r"^mid\.attn_1\.", "mid_block.attentions.0.")]


def diffusers_name(name: str, levels: int) -> str:
    """fwbench's parameter name as diffusers' UNet2DModel state-dict key."""
    m = re.match(r"^(down|up)\.(\d+)\.(block|attn)\.(\d+)\.(.*)$", name)
    if m:
        side, i, kind, j, rest = m.groups()
        i = int(i) if side == "down" else levels - 1 - int(i)
        name = f"{side}_blocks.{i}.{'resnets' if kind == 'block' else 'attentions'}.{j}.{rest}"
    m = re.match(r"^(down|up)\.(\d+)\.((?:down|up)sample\..*)$", name)
    if m:
        side, i, rest = m.groups()
        i = int(i) if side == "down" else levels - 1 - int(i)
        name = f"{side}_blocks.{i}.{rest}"
    for pattern, new in _RENAMES:
        name = re.sub(pattern, new, name)
    return name


def unet(cfg: D.DiffusionConfig) -> Any:
    """diffusers' UNet2DModel with the DDPM UNet of `cfg`."""
    from diffusers import UNet2DModel
    attn = [res in cfg.attn_resolutions for res in cfg.resolutions]
    return UNet2DModel(sample_size=cfg.image_size, in_channels=cfg.in_channels, out_channels=cfg.in_channels,
                       block_out_channels=tuple(cfg.widths), layers_per_block=cfg.num_res_blocks,
                       down_block_types=tuple("AttnDownBlock2D" if a else "DownBlock2D" for a in attn),
                       up_block_types=tuple("AttnUpBlock2D" if a else "UpBlock2D" for a in reversed(attn)),
                       norm_num_groups=cfg.num_groups, norm_eps=D.GN_EPS, act_fn="silu",
                       time_embedding_type="positional", flip_sin_to_cos=False, freq_shift=1,
                       attention_head_dim=None, downsample_padding=1, resnet_time_scale_shift="default",
                       add_attention=True, dropout=0.0)


def state_dict(cfg: D.DiffusionConfig, params: dict[str, np.ndarray]) -> dict[str, Any]:
    import torch
    out = {}
    for name, a in params.items():
        key = diffusers_name(name, len(cfg.ch_mult))
        if a.ndim == 4 and re.search(r"\.to_(q|k|v|out\.0)\.weight$", key):
            a = a[0, 0].T                                  # 1x1 conv (1, 1, in, out) -> Linear (out, in)
        elif a.ndim == 4:
            a = a.transpose(3, 2, 0, 1)                    # HWIO -> OIHW
        elif a.ndim == 2:
            a = a.T                                        # dense (in, out) -> Linear (out, in)
        out[key] = torch.tensor(np.ascontiguousarray(a))
    return out


def torch_side(cfg: D.DiffusionConfig, params: dict[str, np.ndarray], task: str, mode: str,
               inputs: tuple[np.ndarray, ...], device: str, precision: str) -> Side:
    import torch

    if precision != "fp32":
        raise Unsupported("the diffusers peer runs float32 only here")
    model = unet(cfg).to(device)
    missing, unexpected = model.load_state_dict(state_dict(cfg, params), strict=False)
    if missing or unexpected:
        raise FwbenchError(f"diffusers UNet2DModel weights do not match fwbench's: missing {missing[:4]}, "
                           f"unexpected {unexpected[:4]}")
    fwd = torch.compile(model) if mode == "compiled" else model
    nchw = lambda a: torch.tensor(np.ascontiguousarray(a.transpose(0, 3, 1, 2)), device=device)  # noqa: E731

    def sync(v: Any) -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    if task == "forward":
        model.eval()
        x, t = nchw(inputs[0]), torch.tensor(inputs[1], device=device)

        def forward() -> Any:
            with torch.no_grad():
                return fwd(x, t).sample
        return Side(LIBRARY["torch"], forward, sync, lambda v: v.permute(0, 2, 3, 1).cpu().numpy())

    x0, noise = nchw(inputs[0]), nchw(inputs[2])
    t = torch.tensor(inputs[1], device=device)
    sched = cfg.schedule
    a = torch.tensor(sched.sqrt_alphas_cumprod, dtype=torch.float32, device=device)[t].view(-1, 1, 1, 1)
    s = torch.tensor(sched.sqrt_one_minus_alphas_cumprod, dtype=torch.float32, device=device)[t].view(-1, 1, 1, 1)

    def loss() -> Any:                        # Algorithm 1
        return torch.nn.functional.mse_loss(fwd(a * x0 + s * noise, t).sample, noise)
    return torch_train_side(LIBRARY["torch"], model, loss, D.OPTIMIZER, D.decayed, sync)

SIDES = {"torch": torch_side}
