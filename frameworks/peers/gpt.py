"""The GPT peers: Hugging Face transformers' GPT-2, in each framework the library has it
(transformers 4.x carries PyTorch, Flax and TensorFlow GPT-2 from one configuration), with
fwbench's numpy weights copied in (nothing downloaded) and trained as their users would.

  torch        GPT2LMHeadModel (attn_implementation "sdpa"); train step: cross-entropy on the
               logits, backward, clip_grad_norm_, torch.optim.AdamW (fused), nanoGPT's weight-decay
               groups; compiled: torch.compile of the model (nanoGPT's recipe, the optimizer eager)
  jax          FlaxGPT2LMHeadModule applied to a parameter pytree; train step: jax.value_and_grad
               and optax clip_by_global_norm + adamw (masked to tensors of 2+ dimensions), one
               jax.jit (parameters and state donated); eager: the same functions without jit
  tensorflow   TFGPT2LMHeadModel (tf-keras); train step: GradientTape, tf_keras.optimizers.AdamW
               with global_clipnorm, biases and LayerNorm excluded from weight decay; graph:
               tf.function; compiled: tf.function(jit_compile=True)

Each builder returns a timing.Side doing one call of the task on fixed inputs: `forward` is
the logits of the whole batch, `train_step` one optimizer step returning the loss before it.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from frameworks.peers.timing import Side
from workloads import gpt as W
from workloads.base import FwbenchError, Unsupported, is_accelerator

LIBRARY = {"torch": "HF transformers GPT2LMHeadModel (sdpa)",
           "jax": "HF transformers FlaxGPT2LMHeadModule",
           "tensorflow": "HF transformers TFGPT2LMHeadModel (tf-keras)"}


def hf_config(cfg: W.GPTConfig) -> Any:
    """transformers' GPT2Config for fwbench's GPTConfig: no dropout, GPT-2's tanh GELU, fwbench's
    LayerNorm epsilon, tied head."""
    from transformers import GPT2Config
    return GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.n_embd,
                      n_layer=cfg.n_layer, n_head=cfg.n_head, activation_function="gelu_new",
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=W.LN_EPS,
                      bos_token_id=None, eos_token_id=None, tie_word_embeddings=True)


# ----------------------------------------------------------------------------- PyTorch

def torch_side(cfg: W.GPTConfig, params: dict[str, np.ndarray], task: str, mode: str, tokens: np.ndarray,
               targets: np.ndarray, device: str, precision: str) -> Side:
    import torch
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel._from_config(hf_config(cfg), attn_implementation="sdpa").to(device)
    state = {"transformer." + k: torch.tensor(v) for k, v in params.items()}    # HF's Conv1D is (in, out)
    missing, unexpected = model.load_state_dict(state, strict=False)
    left = [k for k in missing if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))]
    if left or unexpected:
        raise FwbenchError(f"HF GPT-2 weights do not match fwbench's: missing {left}, unexpected {unexpected}")
    x = torch.tensor(tokens, dtype=torch.long, device=device)
    y = torch.tensor(targets, dtype=torch.long, device=device)
    fwd = torch.compile(model) if mode == "compiled" else model
    autocast = dict(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16")

    def sync(v: Any) -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    if task == "forward":
        model.eval()

        def forward() -> Any:
            with torch.no_grad(), torch.autocast(**autocast):
                return fwd(input_ids=x).logits
        return Side(LIBRARY["torch"], forward, sync, lambda v: v.float().cpu().numpy())

    def loss() -> Any:
        with torch.autocast(**autocast):
            logits = fwd(input_ids=x).logits
        return torch.nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
    return torch_train_side(LIBRARY["torch"], model, loss, W.OPTIMIZER, W.decayed, sync)


def torch_train_side(library: str, model: Any, loss: Any, opt: Any, decayed: Any, sync: Any) -> Side:
    """A torch peer's train step as its users write it: loss(), backward, clip_grad_norm_,
    torch.optim.AdamW (fused where it exists, nanoGPT's weight-decay groups), zero_grad."""
    import torch

    from frameworks.torch.optim import adamw

    model.train()
    optim, kind = adamw(dict(model.named_parameters()), opt, decayed)

    def step() -> Any:
        value = loss()
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), opt.clip_norm)
        optim.step()
        optim.zero_grad(set_to_none=True)
        return value.detach()
    return Side(library, step, sync, lambda v: v.cpu().numpy(), f"AdamW {kind}")


# ----------------------------------------------------------------------------- JAX (Flax)

def flax_params(cfg: W.GPTConfig, params: dict[str, np.ndarray]) -> dict[str, Any]:
    """fwbench's parameters as FlaxGPT2LMHeadModule's pytree (its Conv1D kernels are (out, in))."""
    import jax.numpy as jnp

    def conv(n: str) -> dict[str, Any]:
        return {"kernel": jnp.asarray(params[n + ".weight"].T), "bias": jnp.asarray(params[n + ".bias"])}

    def ln(n: str) -> dict[str, Any]:
        return {"scale": jnp.asarray(params[n + ".weight"]), "bias": jnp.asarray(params[n + ".bias"])}
    h = {str(i): {"ln_1": ln(f"h.{i}.ln_1"), "ln_2": ln(f"h.{i}.ln_2"),
                  "attn": {"c_attn": conv(f"h.{i}.attn.c_attn"), "c_proj": conv(f"h.{i}.attn.c_proj")},
                  "mlp": {"c_fc": conv(f"h.{i}.mlp.c_fc"), "c_proj": conv(f"h.{i}.mlp.c_proj")}}
         for i in range(cfg.n_layer)}
    return {"transformer": {"wte": {"embedding": jnp.asarray(params["wte.weight"])},
                            "wpe": {"embedding": jnp.asarray(params["wpe.weight"])}, "h": h, "ln_f": ln("ln_f")}}


def jax_side(cfg: W.GPTConfig, params: dict[str, np.ndarray], task: str, mode: str, tokens: np.ndarray,
             targets: np.ndarray, device: str, precision: str) -> Side:
    import jax
    import jax.numpy as jnp
    import optax
    from transformers.models.gpt2.modeling_flax_gpt2 import FlaxGPT2LMHeadModule

    dev = jax.devices("gpu" if is_accelerator(device) else "cpu")[0]
    module = FlaxGPT2LMHeadModule(hf_config(cfg), dtype=jnp.bfloat16 if precision == "bf16" else jnp.float32)
    state = {"p": jax.device_put(flax_params(cfg, params), dev)}
    x, y = jax.device_put(jnp.asarray(tokens), dev), jax.device_put(jnp.asarray(targets), dev)
    pos = jax.device_put(jnp.broadcast_to(jnp.arange(x.shape[1]), x.shape), dev)
    jit = jax.jit if mode == "compiled" else (lambda f, **kw: f)

    def logits(p: Any, x: Any) -> Any:
        return module.apply({"params": p}, x, attention_mask=None, position_ids=pos, deterministic=True).logits

    if task == "forward":
        fwd = jit(logits)
        return Side(LIBRARY["jax"], lambda: fwd(state["p"], x), jax.block_until_ready,
                    lambda v: np.asarray(v, np.float32))

    o = W.OPTIMIZER
    mask = jax.tree.map(lambda a: a.ndim >= 2, state["p"])
    tx = optax.chain(optax.clip_by_global_norm(o.clip_norm),
                     optax.adamw(o.lr, b1=o.beta1, b2=o.beta2, eps=o.eps, weight_decay=o.weight_decay, mask=mask))
    state["s"] = jax.device_put(tx.init(state["p"]), dev)

    def loss(p: Any, x: Any, y: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(logits(p, x).astype(jnp.float32), y).mean()

    def train(p: Any, s: Any, x: Any, y: Any) -> Any:
        value, g = jax.value_and_grad(loss)(p, x, y)
        u, s = tx.update(g, s, p)
        return optax.apply_updates(p, u), s, value
    train = jit(train, donate_argnums=(0, 1))

    def step() -> Any:
        state["p"], state["s"], value = train(state["p"], state["s"], x, y)
        return value, state["p"], state["s"]
    return Side(LIBRARY["jax"], step, jax.block_until_ready, lambda v: np.asarray(v[0]), "optax adamw")


# ----------------------------------------------------------------------------- TensorFlow

def tf_name(variable_name: str) -> str:
    """A TFGPT2LMHeadModel variable's name as fwbench's parameter name
    ('tfgpt2lm_head_model/transformer/h_._0/ln_1/gamma:0' -> 'h.0.ln_1.weight')."""
    name = variable_name.split("transformer/", 1)[-1].split(":")[0]
    name = re.sub(r"h_\._(\d+)", r"h.\1", name).replace("/", ".")
    return re.sub(r"\.(embeddings|gamma)$", ".weight", re.sub(r"\.beta$", ".bias", name))


def tensorflow_side(cfg: W.GPTConfig, params: dict[str, np.ndarray], task: str, mode: str, tokens: np.ndarray,
                    targets: np.ndarray, device: str, precision: str) -> Side:
    if precision != "fp32":
        raise Unsupported("no bf16 peer for TensorFlow: TFGPT2LMHeadModel has no compute-dtype setting of its own")
    import tensorflow as tf
    import tf_keras
    from transformers import TFGPT2LMHeadModel

    model = TFGPT2LMHeadModel(hf_config(cfg))
    x, y = tf.constant(tokens), tf.constant(targets)
    model(x[:, :1], training=False)                                   # builds the variables
    names = {v.name: tf_name(v.name) for v in model.weights}
    if sorted(names.values()) != sorted(params):
        raise FwbenchError(f"TF GPT-2 variables do not match fwbench's parameters: "
                           f"{sorted(set(names.values()) ^ set(params))[:6]}")
    for v in model.weights:
        v.assign(params[names[v.name]].reshape(v.shape))
    wrap = {"eager": lambda f: f, "graph": tf.function,
            "compiled": lambda f: tf.function(f, jit_compile=True)}[mode]

    def sync(v: Any) -> None:
        tf.nest.map_structure(lambda t: t.numpy(), v)

    if task == "forward":
        fwd = wrap(lambda x: model(x, training=False).logits)
        return Side(LIBRARY["tensorflow"], lambda: fwd(x), sync, lambda v: v.numpy())

    o = W.OPTIMIZER
    optim = tf_keras.optimizers.AdamW(learning_rate=o.lr, weight_decay=o.weight_decay, beta_1=o.beta1,
                                      beta_2=o.beta2, epsilon=o.eps, global_clipnorm=o.clip_norm)
    optim.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])   # tensors of 1 dimension
    ce = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step_fn(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = ce(y, model(x, training=True).logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optim.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    step = wrap(step_fn)
    return Side(LIBRARY["tensorflow"], lambda: step(x, y), sync, lambda v: v.numpy(), "tf_keras AdamW")


SIDES = {"torch": torch_side, "jax": jax_side, "tensorflow": tensorflow_side}
