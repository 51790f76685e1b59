"""TensorFlow's optimizer: torch's AdamW written over tf.Variables, the one home both models
train with (frameworks/tensorflow/gpt.py and diffusion.py)."""
from __future__ import annotations

from typing import Callable

import tensorflow as tf

from workloads.base import AdamW


class AdamWUpdate(tf.Module):
    """torch.optim.AdamW's update with nanoGPT's global-norm clipping, over tf.Variables
    (workloads.base.AdamW):

        g <- g * min(1, clip / (||g||_2 + 1e-6))
        m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
        p <- p (1 - lr wd)   [only params of 2 or more dims]
        p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

    Written out rather than taken from Keras: Keras 3's AdamW (keras/src/optimizers/adam.py
    update_step) computes p -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps), i.e.
    eps is added to the uncorrected sqrt(v) (Kingma & Ba's "epsilon hat"), and its
    global_clipnorm scales by clip / max(||g||, clip), without the 1e-6. Neither is torch's.
    tf.raw_ops.ResourceApplyAdam places eps the same way as Keras.
    """

    def __init__(self, named: dict[str, tf.Variable], hp: AdamW, decayed: Callable[[str, tuple[int, ...]], bool]):
        super().__init__(name="adamw")
        self.hp = hp
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.m = [tf.Variable(tf.zeros_like(p), trainable=False, name=k + ".m") for k, p in named.items()]
        self.v = [tf.Variable(tf.zeros_like(p), trainable=False, name=k + ".v") for k, p in named.items()]
        self.decay = [decayed(k, tuple(p.shape)) for k, p in named.items()]

    def __call__(self, params: list[tf.Variable], grads: list[tf.Tensor]) -> None:
        hp = self.hp
        norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
        scale = tf.minimum(1.0, hp.clip_norm / (norm + 1e-6))
        t = tf.cast(self.step.assign_add(1), tf.float32)
        step_size = hp.lr / (1.0 - tf.pow(hp.beta1, t))
        bias_correction2_sqrt = tf.sqrt(1.0 - tf.pow(hp.beta2, t))
        for p, g, m, v, decay in zip(params, grads, self.m, self.v, self.decay):
            g = g * scale
            m.assign(hp.beta1 * m + (1.0 - hp.beta1) * g)
            v.assign(hp.beta2 * v + (1.0 - hp.beta2) * tf.square(g))
            if decay:
                p.assign(p * (1.0 - hp.lr * hp.weight_decay))
            p.assign_sub(step_size * m / (tf.sqrt(v) / bias_correction2_sqrt + hp.eps))
