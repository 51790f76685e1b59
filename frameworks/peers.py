"""The peer comparison (issue 31): fwbench's GPT train step beside what people would write
themselves, same weights, same batch, one process, interleaved rounds.

    python -m frameworks.peers --device cuda             # GPT-2 124M, batch 12 x 1024, bf16
    python -m frameworks.peers --device cpu --preset tiny --rounds 2 --no-compile

Entries (each one train step: forward, loss, backward, clipping at 1.0, AdamW with nanoGPT's
hyper-parameters and weight-decay rule; those of one framework run on the same numpy weights):
  hf eager / hf compiled      Hugging Face transformers' GPT2LMHeadModel (attn_implementation
                              "sdpa"), built from a GPT2Config with fwbench's weights copied in
                              (nothing downloaded), torch.autocast at bf16, torch.optim.AdamW
                              (fused); + torch.compile for the compiled one
  fwbench torch eager/compiled  fwbench's torch model at the case's precision
  fwbench jax compiled        fwbench's JAX model (jit)
  plain jax compiled          a GPT-2 written plainly in JAX: parameters float32, cast to bf16
                              for the forward, jax.nn.dot_product_attention (cuDNN on a GPU
                              where it compiles, else XLA: the row says which), optax AdamW
An entry whose framework (or transformers) is absent, or that fails to build, is a row with the
reason instead of a time. Every round times `--steps` steps of each entry in turn (the order
rotating), waiting for the device at the end; the table gives each entry's median over the
rounds, its spread (max-min over median) and its ratio to the first entry that ran. The first
step's loss of each entry is printed too: the same weights and batch give the same loss within
the precision's error, the check that the entries do the same work.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np

from workloads import gpt as W
from workloads.base import FwbenchError

Step = Callable[[], Any]          # one train step; returns its loss (a framework scalar)


# ----------------------------------------------------------------------------- the entries

def _torch_sync(device: str) -> Callable[[Any], float]:
    import torch

    def sync(x: Any) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        return float(x)
    return sync


def hf_entry(cfg: W.GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray, targets: np.ndarray,
             device: str, precision: str, compiled: bool) -> tuple[Step, Callable[[Any], float], str]:
    """HF GPT2LMHeadModel with fwbench's weights, autocast at bf16, fused AdamW where it exists."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from frameworks.torch.optim import adamw

    hf_cfg = GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.n_embd,
                        n_layer=cfg.n_layer, n_head=cfg.n_head, activation_function="gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=W.LN_EPS,
                        bos_token_id=None, eos_token_id=None)
    model = GPT2LMHeadModel._from_config(hf_cfg, attn_implementation="sdpa").to(device)
    state = {"transformer." + k: torch.tensor(v) for k, v in params.items()}    # HF's Conv1D is (in, out)
    missing, unexpected = model.load_state_dict(state, strict=False)
    left = [k for k in missing if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))]
    if left or unexpected:
        raise FwbenchError(f"HF GPT-2 weights do not match fwbench's: missing {left}, unexpected {unexpected}")
    model.train()
    opt = W.OPTIMIZER
    optim, _ = adamw(dict(model.named_parameters()), opt, W.decayed)    # fwbench's groups; fused where it exists
    x, y = torch.tensor(tokens, dtype=torch.long, device=device), torch.tensor(targets, dtype=torch.long, device=device)
    fwd = torch.compile(model) if compiled else model
    autocast = precision == "bf16"

    def step() -> Any:
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
            loss = fwd(input_ids=x, labels=None).logits
            loss = torch.nn.functional.cross_entropy(loss.float().view(-1, loss.size(-1)), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), opt.clip_norm)
        optim.step()
        optim.zero_grad(set_to_none=True)
        return loss.detach()
    return step, _torch_sync(device), "sdpa under autocast"


def fwbench_entry(framework: str, cfg: W.GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray,
                  targets: np.ndarray, device: str, precision: str, mode: str
                  ) -> tuple[Step, Callable[[Any], float], str]:
    """fwbench's own model of `framework`, built as the harness builds a train_step case."""
    import frameworks
    from workloads.case import Case, Placement

    adapter = frameworks.load(framework)
    case = Case(framework, "gpt", "train_step", mode, precision=precision, placement=Placement(device))
    model = adapter.build(case, cfg, params)
    dev = adapter.own_device(device)
    x, y = adapter.asarray(tokens, dev), adapter.asarray(targets, dev)

    def sync(v: Any) -> float:
        return float(adapter.to_numpy(adapter.sync(v)))
    return (lambda: model.train_step(x, y)), sync, adapter.attention_impl(dev, precision)


def plain_jax_entry(cfg: W.GPTConfig, params: dict[str, np.ndarray], tokens: np.ndarray, targets: np.ndarray,
                    device: str, precision: str) -> tuple[Step, Callable[[Any], float], str]:
    """A GPT-2 written plainly in JAX (the way a JAX user would, not fwbench's policy code)."""
    import jax
    import jax.numpy as jnp

    from frameworks.jax.optim import adamw

    dt = jnp.bfloat16 if precision == "bf16" else jnp.float32
    dev = jax.devices("gpu" if device in ("cuda", "gpu") else "cpu")[0]
    impl = "cudnn" if dev.platform == "gpu" and dt == jnp.bfloat16 else "xla"

    def ln(x, w, b):
        x32 = x.astype(jnp.float32)
        mu = x32.mean(-1, keepdims=True)
        var = ((x32 - mu) ** 2).mean(-1, keepdims=True)
        return (x32 - mu) * jax.lax.rsqrt(var + W.LN_EPS) * w + b

    def loss_fn(p, idx, tgt, impl):
        B, T = idx.shape
        C, nh = cfg.n_embd, cfg.n_head
        q = {k: v.astype(dt) for k, v in p.items()}
        x = (p["wte.weight"][idx] + p["wpe.weight"][:T]).astype(dt)
        for i in range(cfg.n_layer):
            h = f"h.{i}."
            a = ln(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"]).astype(dt)
            qkv = a @ q[h + "attn.c_attn.weight"] + q[h + "attn.c_attn.bias"]
            qq, kk, vv = (t.reshape(B, T, nh, C // nh) for t in jnp.split(qkv, 3, axis=-1))
            y = jax.nn.dot_product_attention(qq, kk, vv, is_causal=True, implementation=impl).reshape(B, T, C)
            x = x + (y @ q[h + "attn.c_proj.weight"] + q[h + "attn.c_proj.bias"])
            m = ln(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"]).astype(dt)
            m = jax.nn.gelu(m @ q[h + "mlp.c_fc.weight"] + q[h + "mlp.c_fc.bias"], approximate=True)
            x = x + (m @ q[h + "mlp.c_proj.weight"] + q[h + "mlp.c_proj.bias"])
        x = ln(x, p["ln_f.weight"], p["ln_f.bias"]).astype(dt)
        logits = (x @ q["wte.weight"].T).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, tgt[..., None], axis=-1).mean()

    tx = adamw(params, W.OPTIMIZER, W.decayed)

    def build(impl):
        @jax.jit
        def train(p, s, idx, tgt):
            loss, g = jax.value_and_grad(loss_fn)(p, idx, tgt, impl)
            u, s = tx.update(g, s, p)
            return jax.tree.map(lambda a, b: a + b, p, u), s, loss
        return train

    state = {"p": jax.device_put(dict(params), dev)}
    state["s"] = tx.init(state["p"])
    x, y = jax.device_put(tokens, dev), jax.device_put(targets, dev)
    train = build(impl)
    if impl == "cudnn":                      # cuDNN's kernel where it compiles for this GPU and shape
        try:
            train.lower(state["p"], state["s"], x, y).compile()
        except Exception as e:               # noqa: BLE001 (any refusal: the row names XLA instead)
            impl, train = f"xla (cudnn refused: {str(e).splitlines()[0][:80]})", build("xla")

    def step() -> Any:
        state["p"], state["s"], loss = train(state["p"], state["s"], x, y)
        return loss
    return step, lambda v: float(jax.block_until_ready(v)), f"jax.nn.dot_product_attention ({impl})"


# ----------------------------------------------------------------------------- the comparison

def entries(args: argparse.Namespace) -> list[tuple[str, Callable[[], tuple[Step, Any, str]]]]:
    cfg = W.preset(args.preset).config
    batch = args.batch or W.preset(args.preset).batch
    params = W.init_params(cfg, seed=0)
    tokens, targets = W.make_batch(cfg, batch, seed=0)
    d, pr = args.device, args.precision
    out: list[tuple[str, Callable[[], tuple[Step, Any, str]]]] = []
    for compiled in ((False, True) if args.compile else (False,)):
        tag = "compiled" if compiled else "eager"
        out.append((f"hf transformers {tag}",
                    lambda c=compiled: hf_entry(cfg, params, tokens, targets, d, pr, c)))
        out.append((f"fwbench torch {tag}",
                    lambda m=tag: fwbench_entry("torch", cfg, params, tokens, targets, d, pr, m)))
    out.append(("fwbench jax compiled", lambda: fwbench_entry("jax", cfg, params, tokens, targets, d, pr, "compiled")))
    out.append(("plain jax compiled", lambda: plain_jax_entry(cfg, params, tokens, targets, d, pr)))
    return out


def compare(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Build every entry, run its first step (the loss), then `rounds` interleaved rounds."""
    rows: list[dict[str, Any]] = []
    for name, make in entries(args):
        row: dict[str, Any] = {"entry": name, "times": []}
        try:
            step, sync, attention = make()
            row.update(step=step, sync=sync, attention=attention, first_loss=sync(step()))
            for _ in range(args.warmup):
                sync(step())
        except ImportError as e:
            row["skipped"] = f"{e.name or e} is not installed"
        except Exception as e:              # noqa: BLE001 (one entry's failure is its row's reason)
            row["skipped"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]
        rows.append(row)
    live = [r for r in rows if "step" in r]
    for r in range(args.rounds):
        for row in live[r % len(live):] + live[:r % len(live)] if live else []:
            t0 = time.perf_counter()
            for _ in range(args.steps - 1):
                row["step"]()
            row["sync"](row["step"]())
            row["times"].append((time.perf_counter() - t0) / args.steps * 1e3)
    return rows


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    base = next((statistics.median(r["times"]) for r in rows if r["times"]), None)
    lines = [f"peers: GPT preset {args.preset}, batch {args.batch or W.preset(args.preset).batch}, device "
             f"{args.device}, {args.precision}; {args.rounds} interleaved rounds of {args.steps} steps",
             "| train step | ms (median) | spread | vs first | first loss | attention |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if not r["times"]:
            lines.append(f"| {r['entry']} | — | | | | skipped: {r.get('skipped', 'no rounds')} |")
            continue
        med = statistics.median(r["times"])
        spread = (max(r["times"]) - min(r["times"])) / med
        lines.append(f"| {r['entry']} | {med:.2f} | {spread:.1%} | {med / base:.3f}x | {r['first_loss']:.5f} "
                     f"| {r['attention']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="python -m frameworks.peers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--preset", default=None, help="GPT preset (default: gpt2 on cuda, tiny on cpu)")
    ap.add_argument("--batch", type=int, default=None, help="batch (default: the preset's)")
    ap.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=3, help="steps per entry per round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps after the first (at least 1: the plain "
                    "JAX step compiles again on its second call, once its optimizer state's types settle)")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="leave out the torch.compile entries")
    args = ap.parse_args(argv)
    args.preset = args.preset or ("gpt2" if args.device == "cuda" else "tiny")
    for k in ("rounds", "steps", "warmup"):
        if getattr(args, k) < 1:
            ap.error(f"--{k} must be at least 1, got {getattr(args, k)}")
    rows = compare(args)
    print(table(rows, args), flush=True)
    return rows


if __name__ == "__main__":
    main()
