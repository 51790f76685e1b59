"""JAX's optimizer: the one optax chain both models train with (frameworks/jax/gpt.py and
diffusion.py)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import optax

from workloads.base import AdamW


def adamw(params: dict[str, np.ndarray], opt: AdamW, decayed: Callable[[str, tuple[int, ...]], bool]
          ) -> optax.GradientTransformation:
    """The workload's update: clip the global gradient norm, then AdamW with weight decay on
    the parameters `decayed(name, shape)` selects (nanoGPT's rule: tensors of 2+ dimensions).

    optax.adamw is torch's AdamW: m, v with bias correction, update m_hat/(sqrt(v_hat)+eps),
    then p - lr (update + wd p) = p (1 - lr wd) - lr update. optax's clip scales by
    clip/||g|| where torch scales by clip/(||g|| + 1e-6): a relative difference of
    1e-6/||g||, and only on steps where ||g|| > clip.
    """
    mask = {k: decayed(k, v.shape) for k, v in params.items()}
    return optax.chain(
        optax.clip_by_global_norm(opt.clip_norm),
        optax.adamw(opt.lr, b1=opt.beta1, b2=opt.beta2, eps=opt.eps, weight_decay=opt.weight_decay, mask=mask))
