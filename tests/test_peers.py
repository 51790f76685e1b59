"""The peer comparison script (frameworks/peers.py, issue 31) at the tiny preset on the CPU:
every entry present runs, all start from the same loss (same weights and batch) within bf16's
error of the float64 reference, and an absent transformers is a row with its reason."""
from __future__ import annotations

import sys

import pytest

from frameworks import peers
from workloads import gpt as W

ARGS = ["--device", "cpu", "--preset", "tiny", "--rounds", "1", "--steps", "1", "--warmup", "1", "--no-compile"]


def test_the_peers_do_the_same_work(capsys):
    pytest.importorskip("transformers", reason="transformers is not installed: the HF peer cannot run")
    rows = peers.main(ARGS)
    out = capsys.readouterr().out
    assert [r["entry"] for r in rows] == ["hf transformers eager", "fwbench torch eager", "fwbench jax compiled",
                                          "plain jax compiled"]
    assert all(r["times"] and "skipped" not in r for r in rows), [r.get("skipped") for r in rows]
    cfg, p = W.preset("tiny").config, W.preset("tiny")
    tokens, targets = W.make_batch(cfg, p.batch, seed=0)
    ref = float(W.reference_loss(cfg, W.init_params(cfg, seed=0), tokens, targets))
    errs = {r["entry"]: abs(r["first_loss"] - ref) for r in rows}
    assert max(errs.values()) < 1e-3, errs          # achieved 6e-5..1.1e-4 (bf16 products): ~10x
    assert "| hf transformers eager |" in out and "sdpa under autocast" in out


def test_an_absent_transformers_is_a_row_with_its_reason(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)     # import transformers -> ImportError
    monkeypatch.setattr(peers, "fwbench_entry", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("not here")))
    monkeypatch.setattr(peers, "plain_jax_entry", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("not here")))
    rows = peers.main(ARGS)
    assert rows[0]["skipped"] == "transformers is not installed" and not rows[0]["times"]
    assert "skipped: transformers is not installed" in capsys.readouterr().out


def test_bad_rounds_is_one_line(capsys):
    with pytest.raises(SystemExit):
        peers.main(ARGS[:-5] + ["--rounds", "0"])
    assert "--rounds must be at least 1, got 0" in capsys.readouterr().err
