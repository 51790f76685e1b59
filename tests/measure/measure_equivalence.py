"""Print the error every equivalence check achieves, per framework and mode: the numbers
tests/support/equivalence.py's tolerances are set from. Run: python -m tests.measure.measure_equivalence"""
from __future__ import annotations

import sys

from tests import test_diffusion_equivalence as TD
from tests import test_gpt_equivalence as TG
from tests.support.helpers import impls
from workloads.base import rel_err


def main(modes: tuple[str, ...]) -> None:
    ref_g = {"forward": TG.gpt.reference_logits(TG.CFG, TG.PARAMS, TG.TOKENS),
             "loss": TG.gpt.reference_loss(TG.CFG, TG.PARAMS, TG.TOKENS, TG.TARGETS)}
    ref_d = {"forward": TD.D.reference_eps(TD.CFG, TD.PARAMS, TD.X_NOISY, TD.T),
             "loss": TD.D.reference_loss(TD.CFG, TD.PARAMS, TD.X0, TD.T, TD.NOISE), **TD.reference_samples()}
    for wl, W, ref in (("gpt", TG.W, ref_g), ("diffusion", TD.W, ref_d)):
        for p in impls():
            name, mode = p.values[:2]
            if mode not in modes:
                continue
            out = W.run(name, mode)
            row = {"forward": W.forward_err(out, ref["forward"]), "loss": W.loss_err(out, ref["loss"]),
                   "grad_fd": W.grad_fd_err(out["grads"])[0], "adamw": W.adamw_err(out)[0],
                   "gnorm": float(sum((g.astype("float64") ** 2).sum() for g in out["grads"].values()) ** 0.5),
                   "loss_ratio": out["losses"][-1] / out["losses"][0]}
            if wl == "diffusion":
                row["sample"] = max(rel_err(out[m], ref[m]) for m in ("ddim", "ddpm"))
            print(wl, name, mode, " ".join(f"{k}={v:.1e}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or ("eager", "compiled", "graph"))
