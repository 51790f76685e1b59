"""Peers: fwbench's implementations beside the ones a user of each framework would pick
instead, on the same weights and inputs, outputs compared first, then timed in interleaved
rounds in one process; the ratio fwbench/peer with a 95% interval.

    python -m frameworks.peers                                  # CPU, small presets, every pair
    python -m frameworks.peers --out docs/measurements/peers-cpu-2core --record
    python -m frameworks.peers --preset tiny --rounds 2 --modes eager --framework jax
    python -m frameworks.peers --device cuda --precision bf16 --workload gpt --preset gpt=gpt2

The peers (optional extra `[peers]`: transformers 4.x, which still carries GPT-2 in PyTorch,
Flax and TensorFlow; flax; tf-keras; diffusers):
  gpt        PyTorch: HF GPT2LMHeadModel; JAX: HF FlaxGPT2LMHeadModule; TensorFlow: HF
             TFGPT2LMHeadModel (frameworks/peers/gpt.py)
  diffusion  PyTorch: diffusers UNet2DModel as the DDPM UNet (frameworks/peers/diffusion.py);
             diffusers has no JAX or TensorFlow UNet2DModel: those rows say so
Tasks `forward` and `train_step` of both workloads, in every mode of the framework (each peer
in the same mode: eager, torch.compile, jax.jit, tf.function, tf.function with XLA).

Each framework runs in a process of its own (the peers' frameworks never share one), started
in turn with the same threads; inside it, for every pair, both sides are built, their first
outputs compared (timing.difference against TOLERANCE; a pair that differs is a row with the
difference and no time), then timed (timing.interleaved). A peer whose library is absent, or a
side that fails to build, is a row with its reason; every other row survives. `--record`
writes the table where the reports read it (reports/data/peers.json, by device kind), so every
report names, per framework, how its implementations compare with their peers.
"""
from __future__ import annotations

# How far fwbench's first outputs may lie from the peer's before a pair is refused (max |a - b|
# over max |b|): about ten times the largest difference measured (docs/measurements/peers-cpu-2core:
# logits and eps at float32, and the two first losses of a train step, the second after one update).
TOLERANCE = {"fp32": 1e-4, "bf16": 3e-2}
WORKLOADS = ("gpt", "diffusion")
TASKS = ("forward", "train_step")
