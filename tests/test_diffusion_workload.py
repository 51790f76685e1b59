"""The framework-free DDPM workload: schedule, samplers, config, parameters, FLOPs, data
and the numpy reference UNet (numpy only, fast)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from workloads import diffusion as D
from workloads.base import FwbenchError, TaskSpec, replace_config

SCHED = D.Schedule()
T = SCHED.num_timesteps
TINY = D.preset("tiny").config
CIFAR = D.preset("ddpm-cifar").config


def perturbed(params: dict[str, np.ndarray], seed: int = 1) -> dict[str, np.ndarray]:
    """Biases and GroupNorm parameters away from 0 / 1, so they matter."""
    rng = np.random.default_rng(seed)
    return {k: (v + 0.05 * rng.standard_normal(v.shape)).astype(np.float32) if v.ndim == 1 else v
            for k, v in params.items()}


@pytest.fixture(scope="module")
def tiny_params() -> dict[str, np.ndarray]:
    return perturbed(D.init_params(TINY, seed=0))


# ----------------------------------------------------------------------------- schedule

def test_schedule_closed_forms():
    s = SCHED
    assert s.betas.shape == (T,) and s.betas.dtype == np.float64
    assert s.betas[0] == 1e-4 and abs(s.betas[-1] - 0.02) < 1e-15
    np.testing.assert_allclose(np.diff(s.betas), (0.02 - 1e-4) / (T - 1), rtol=1e-9)
    np.testing.assert_allclose(s.alphas, 1 - s.betas, rtol=0, atol=0)
    abar = np.array([math.prod(1 - s.betas[:t + 1]) for t in (0, 1, 10, 500, T - 1)])
    np.testing.assert_allclose(s.alphas_cumprod[[0, 1, 10, 500, T - 1]], abar, rtol=1e-12)
    assert s.alphas_cumprod_prev[0] == 1.0
    np.testing.assert_array_equal(s.alphas_cumprod_prev[1:], s.alphas_cumprod[:-1])
    ab, abp, b = s.alphas_cumprod, s.alphas_cumprod_prev, s.betas
    np.testing.assert_allclose(s.sqrt_alphas_cumprod ** 2, ab, rtol=1e-12)
    np.testing.assert_allclose(s.sqrt_one_minus_alphas_cumprod ** 2, 1 - ab, rtol=1e-12)
    np.testing.assert_allclose(np.exp(s.log_one_minus_alphas_cumprod), 1 - ab, rtol=1e-12)
    np.testing.assert_allclose(s.sqrt_recip_alphas_cumprod * s.sqrt_alphas_cumprod, 1, rtol=1e-12)
    np.testing.assert_allclose(s.sqrt_recipm1_alphas_cumprod ** 2, 1 / ab - 1, rtol=1e-10)
    np.testing.assert_allclose(s.posterior_variance, b * (1 - abp) / (1 - ab), rtol=1e-12)
    assert s.posterior_variance[0] == 0.0
    np.testing.assert_allclose(s.posterior_log_variance_clipped[1:], np.log(s.posterior_variance[1:]), rtol=1e-12)
    assert s.posterior_log_variance_clipped[0] == s.posterior_log_variance_clipped[1]
    np.testing.assert_allclose(s.posterior_mean_coef1, b * np.sqrt(abp) / (1 - ab), rtol=1e-12)
    np.testing.assert_allclose(s.posterior_mean_coef2, (1 - abp) * np.sqrt(1 - b) / (1 - ab), rtol=1e-12)
    # the alpha-bar at T is tiny: x_T is (nearly) pure noise, as the paper designed
    assert s.alphas_cumprod[-1] < 1e-4


def test_schedule_matches_the_markov_chain_and_posterior():
    """q(x_t | x_0) from iterating x_t = sqrt(1 - beta_t) x_{t-1} + sqrt(beta_t) z: the
    mean factor is sqrt(abar_t), the variance 1 - abar_t. Bayes' rule for
    q(x_{t-1} | x_t, x_0) gives precision 1/(1 - abar_{t-1}) + alpha_t / beta_t."""
    m, v = 1.0, 0.0
    for t in range(T):
        m, v = math.sqrt(1 - SCHED.betas[t]) * m, (1 - SCHED.betas[t]) * v + SCHED.betas[t]
        if t in (0, 7, 499, T - 1):
            assert abs(m - SCHED.sqrt_alphas_cumprod[t]) < 1e-12
            assert abs(v - (1 - SCHED.alphas_cumprod[t])) < 1e-12
    t = np.arange(1, T)
    ab_prev, a, b = SCHED.alphas_cumprod_prev[t], SCHED.alphas[t], SCHED.betas[t]
    var = 1 / (1 / (1 - ab_prev) + a / b)
    np.testing.assert_allclose(SCHED.posterior_variance[t], var, rtol=1e-10)
    np.testing.assert_allclose(SCHED.posterior_mean_coef1[t], var * np.sqrt(ab_prev) / (1 - ab_prev), rtol=1e-10)
    np.testing.assert_allclose(SCHED.posterior_mean_coef2[t], var * np.sqrt(a) / b, rtol=1e-10)


def test_schedule_is_frozen_and_validated():
    with pytest.raises(ValueError):
        SCHED.betas[0] = 1.0                        # read-only arrays
    assert D.Schedule() == SCHED and hash(D.Schedule()) == hash(SCHED)
    with pytest.raises(FwbenchError, match="beta_start <= beta_end"):
        D.Schedule(beta_start=0.1, beta_end=0.01)
    with pytest.raises(FwbenchError, match="num_timesteps"):
        D.Schedule(num_timesteps=0)


def test_q_sample_mean_and_variance():
    x0 = D.make_images(TINY, 2, seed=0).astype(np.float64)
    t = np.array([3, 700], np.int32)
    mean = D.q_sample(SCHED, x0, t, np.zeros_like(x0))
    np.testing.assert_allclose(mean, SCHED.sqrt_alphas_cumprod[t][:, None, None, None] * x0, rtol=1e-12)
    noise = np.random.default_rng(0).standard_normal((4000, 2, 1, 1, 1))
    xs = np.stack([D.q_sample(SCHED, x0[:, :1, :1, :1], t, n) for n in noise])     # (4000, 2, 1, 1, 1)
    np.testing.assert_allclose(xs.mean(0).ravel(), mean[:, 0, 0, 0], atol=0.05)
    np.testing.assert_allclose(xs.var(0).ravel(), 1 - SCHED.alphas_cumprod[t], rtol=0.08)


# ----------------------------------------------------------------------------- samplers

def test_respaced_timesteps():
    np.testing.assert_array_equal(D.respaced_timesteps(SCHED, 10), np.arange(0, 1000, 100))
    np.testing.assert_array_equal(D.respaced_timesteps(SCHED, T), np.arange(T))
    np.testing.assert_array_equal(D.respaced_timesteps(SCHED, 3), [0, 333, 666])
    assert D.respaced_timesteps(SCHED, 7).dtype == np.int32
    for bad in (0, T + 1, 2.5):
        with pytest.raises(FwbenchError, match="sampler steps"):
            D.respaced_timesteps(SCHED, bad)
    with pytest.raises(FwbenchError, match="unknown sampler"):
        D.sampler_coefficients(SCHED, "euler", 10)


def test_ddpm_with_all_steps_is_algorithm_2():
    c = D.sampler_coefficients(SCHED, "ddpm", T)
    t = np.arange(T - 1, -1, -1)
    assert c["t"].dtype == np.int32
    np.testing.assert_array_equal(c["t"], t)
    al, b, ab = SCHED.alphas[t], SCHED.betas[t], SCHED.alphas_cumprod[t]
    np.testing.assert_allclose(c["a"], 1 / np.sqrt(al), rtol=1e-12)
    np.testing.assert_allclose(c["b"], -b / np.sqrt(1 - ab) / np.sqrt(al), rtol=1e-10)
    np.testing.assert_allclose(c["c"][:-1], np.sqrt(b[:-1]), rtol=1e-12)
    assert c["c"][-1] == 0.0                    # z = 0 at the last step (t = 1 in the paper)
    # the same update is the posterior mean at the predicted x0 (the DDPM code's route)
    x, eps = np.random.default_rng(0).standard_normal((2, T))
    x0_hat = SCHED.sqrt_recip_alphas_cumprod[t] * x - SCHED.sqrt_recipm1_alphas_cumprod[t] * eps
    mean = SCHED.posterior_mean_coef1[t] * x0_hat + SCHED.posterior_mean_coef2[t] * x
    np.testing.assert_allclose(c["a"] * x + c["b"] * eps, mean, rtol=1e-8, atol=1e-10)


def test_ddim_coefficients_are_the_x0_prediction_update():
    for steps in (1, 10, 37):
        c = D.sampler_coefficients(SCHED, "ddim", steps)
        assert np.all(c["c"] == 0)
        tau = D.respaced_timesteps(SCHED, steps)[::-1]
        x, eps = np.random.default_rng(steps).standard_normal((2, steps))
        ab = SCHED.alphas_cumprod[tau]
        ab_prev = np.append(SCHED.alphas_cumprod[tau[1:]], 1.0)
        x0_hat = (x - np.sqrt(1 - ab) * eps) / np.sqrt(ab)
        want = np.sqrt(ab_prev) * x0_hat + np.sqrt(1 - ab_prev) * eps
        np.testing.assert_allclose(c["a"] * x + c["b"] * eps, want, rtol=1e-9, atol=1e-12)


def _oracle(x0: np.ndarray):
    """The perfect denoiser for a known x0: the noise that q_sample would have used."""
    return lambda x, t: (x - D._per_image(SCHED.sqrt_alphas_cumprod, t) * x0) \
        / D._per_image(SCHED.sqrt_one_minus_alphas_cumprod, t)


@pytest.mark.parametrize("steps", [1, 10, 1000])
def test_ddim_with_a_perfect_denoiser_recovers_x0(steps):
    x0 = D.make_images(TINY, 2, seed=5).astype(np.float64)
    t_top = np.full(2, D.respaced_timesteps(SCHED, steps)[-1], np.int32)
    x_T = D.q_sample(SCHED, x0, t_top, D.make_noise(TINY, (2,), seed=5))
    out = D.p_sample_loop(_oracle(x0), D.sampler_coefficients(SCHED, "ddim", steps), x_T)
    np.testing.assert_allclose(out, x0, atol=1e-9)


def test_respaced_ddpm_step_is_the_respaced_posterior():
    """With a perfect denoiser each ancestral step is the posterior q(x_prev | x, x0) of the
    respaced chain: its mean, plus sigma z with sigma^2 = beta'; the last step gives x0."""
    steps = 10
    x0 = D.make_images(TINY, 2, seed=6).astype(np.float64)
    c = D.sampler_coefficients(SCHED, "ddpm", steps)
    z = D.make_noise(TINY, (steps, 2), seed=6)
    x = D.q_sample(SCHED, x0, np.full(2, c["t"][0], np.int32), D.make_noise(TINY, (2,), seed=7))
    ab = SCHED.alphas_cumprod[c["t"]]
    ab_prev = np.append(ab[1:], 1.0)
    for s in range(steps):
        beta = 1 - ab[s] / ab_prev[s]
        mean = (np.sqrt(ab_prev[s]) * beta * x0 + np.sqrt(1 - beta) * (1 - ab_prev[s]) * x) / (1 - ab[s])
        x_next = D.p_sample_loop(_oracle(x0), {k: v[s:s + 1] for k, v in c.items()}, x, z[s:s + 1])
        np.testing.assert_allclose(x_next - c["c"][s] * z[s], mean, atol=1e-9)
        if s < steps - 1:
            assert abs(c["c"][s] - math.sqrt(beta)) < 1e-12
        x = x_next
    np.testing.assert_allclose(x, x0, atol=1e-9)


def test_p_sample_loop_checks_noise():
    c = D.sampler_coefficients(SCHED, "ddpm", 3)
    x = np.zeros((1, 2, 2, 1))
    with pytest.raises(FwbenchError, match="needs noise"):
        D.p_sample_loop(lambda x, t: x, c, x)
    with pytest.raises(FwbenchError, match="noise must have shape"):
        D.p_sample_loop(lambda x, t: x, c, x, np.zeros((2, 1, 2, 2, 1)))


def test_training_loss_is_mse_of_the_noise():
    x0, t, noise = D.make_train_batch(TINY, 2, seed=1)
    assert D.training_loss(lambda x, tt: noise.astype(np.float64), SCHED, x0, t, noise) == 0.0
    assert abs(D.training_loss(lambda x, tt: np.zeros(x.shape), SCHED, x0, t, noise)
               - np.mean(noise.astype(np.float64) ** 2)) < 1e-12


# ----------------------------------------------------------------------------- config

@pytest.mark.parametrize("changes,message", [
    (dict(image_size=0), "image_size must be a positive integer"),
    (dict(num_res_blocks=-1), "num_res_blocks must be a positive integer"),
    (dict(ch_mult=[1, 2]), "ch_mult must be a tuple of positive integers"),
    (dict(ch_mult=()), "ch_mult must name at least one level"),
    (dict(ch_mult=(1, 0)), "ch_mult must be a tuple of positive integers"),
    (dict(ch=18), "ch \\(18\\) must be divisible by num_groups \\(4\\)"),
    (dict(ch=2, num_groups=2), "ch must be even and at least 4"),
    (dict(ch=3, num_groups=3), "ch must be even and at least 4"),
    (dict(image_size=20, ch_mult=(1, 2, 2, 2)), "divisible by 2\\*\\*\\(len\\(ch_mult\\)-1\\) = 8"),
    (dict(attn_resolutions=(4,)), "\\[4\\] are never reached: the levels run at 16, 8"),
    (dict(dropout=0.1), "dropout must be 0.0"),
])
def test_config_validation_names_the_problem(changes, message):
    with pytest.raises(FwbenchError, match=message) as e:
        replace_config(TINY, **changes)
    assert "\n" not in str(e.value)


def test_config_checks_inputs():
    with pytest.raises(FwbenchError, match="NHWC"):
        TINY.check_images(np.zeros((2, 3, 16, 16)))
    with pytest.raises(FwbenchError, match="lie in \\[0, 1000\\)"):
        TINY.check_timesteps(np.array([0, 1000]), 2)
    with pytest.raises(FwbenchError, match="integers of shape \\(2,\\)"):
        TINY.check_timesteps(np.array([0.5, 1.0]), 2)
    with pytest.raises(FwbenchError, match="unknown diffusion preset 'big'"):
        D.preset("big")


# ----------------------------------------------------------------------------- params

def test_param_counts():
    # Ho et al. 2020 report 35.7M parameters for the CIFAR-10 model
    assert D.n_params(CIFAR) == 35_746_307
    assert D.n_params(TINY) == 177_427
    assert D.n_params(D.preset("small").config) == 2_539_571


def test_param_names_follow_the_checkpoint():
    s = D.param_shapes(CIFAR)
    assert s["temb.dense.0.weight"] == (128, 512) and s["temb.dense.1.bias"] == (512,)
    assert s["conv_in.weight"] == (3, 3, 3, 128)
    assert s["down.0.block.0.conv1.weight"] == (3, 3, 128, 128)
    assert "down.0.block.0.nin_shortcut.weight" not in s
    assert s["down.1.block.0.nin_shortcut.weight"] == (1, 1, 128, 256)
    assert s["down.1.attn.1.q.weight"] == (1, 1, 256, 256)          # attention at 16x16
    assert "down.0.attn.0.q.weight" not in s and "down.3.downsample.conv.weight" not in s
    assert s["down.2.downsample.conv.weight"] == (3, 3, 256, 256)
    assert s["mid.attn_1.proj_out.weight"] == (1, 1, 256, 256)
    assert s["up.3.block.0.conv1.weight"] == (3, 3, 512, 256)        # h (256) + skip (256)
    assert s["up.0.block.2.nin_shortcut.weight"] == (1, 1, 256, 128)  # h (128) + conv_in (128)
    assert s["up.1.block.2.norm1.weight"] == (384,)                  # h (256) + skip (128)
    assert s["up.1.upsample.conv.weight"] == (3, 3, 256, 256) and "up.0.upsample.conv.weight" not in s
    assert s["norm_out.weight"] == (128,) and s["conv_out.weight"] == (3, 3, 128, 3)
    assert sum(k.endswith(".q.weight") for k in s) == 2 + 1 + 3   # down 16x16 (2 blocks), mid, up 16x16 (3 blocks)
    assert len(s) == 328            # 10 outer + 8 down, 2 mid, 12 up resnets + 6 attn + 6 resamplers


def test_init_statistics_and_determinism():
    p = D.init_params(CIFAR, seed=0)
    assert all(v.dtype == np.float32 for v in p.values())
    D.check_params(CIFAR, p)
    for name, shape in D.param_shapes(CIFAR).items():
        v = p[name]
        if len(shape) >= 2:
            limit = math.sqrt(3 / (np.prod(shape[:-2], dtype=int) * (shape[-2] + shape[-1]) / 2))
            assert np.abs(v).max() <= limit * (1 + 1e-6), name
            if v.size >= 10_000:
                assert abs(v.std() / (limit / math.sqrt(3)) - 1) < 0.05, name
                assert abs(v.mean()) < 0.05 * limit, name
        elif name.endswith(".weight"):
            assert np.all(v == 1), name
        else:
            assert np.all(v == 0), name
    q = D.init_params(CIFAR, seed=0)
    assert all(np.array_equal(p[k], q[k]) for k in p)
    r = D.init_params(TINY, seed=1)
    assert not np.array_equal(D.init_params(TINY, seed=0)["conv_in.weight"], r["conv_in.weight"])


def test_check_params_names_what_differs():
    p = D.init_params(TINY)
    with pytest.raises(FwbenchError, match="missing \\['conv_in.weight'\\]"):
        D.check_params(TINY, {k: v for k, v in p.items() if k != "conv_in.weight"})
    with pytest.raises(FwbenchError, match="conv_out.bias has shape \\(4,\\), config needs \\(3,\\)"):
        D.check_params(TINY, {**p, "conv_out.bias": np.zeros(4, np.float32)})


# ----------------------------------------------------------------------------- FLOPs

def _flops_from_weights(cfg: D.DiffusionConfig, batch: int) -> float:
    """An independent count: every conv/dense weight does one MAC per output pixel, where
    the pixel count follows from the parameter's name; attention adds 2 N^2 C per block."""
    S, L = cfg.image_size, len(cfg.ch_mult)

    def res(name: str) -> int:
        part = name.split(".")
        if part[0] == "temb" or part[-2] == "temb_proj":
            return 1
        if part[0] in ("conv_in", "conv_out"):
            return S
        if part[0] == "mid":
            return S >> (L - 1)
        level = int(part[1])
        if part[2] == "downsample":
            return S >> (level + 1)
        if part[2] == "upsample":
            return S >> (level - 1)
        return S >> level

    macs = sum(res(k) ** 2 * int(np.prod(s)) for k, s in D.param_shapes(cfg).items()
               if k.endswith(".weight") and len(s) >= 2)
    for k, s in D.param_shapes(cfg).items():
        if k.endswith(".q.weight"):
            n = res(k) ** 2
            macs += 2 * n * n * s[-1]                        # q k^T and att v
    return 2.0 * batch * macs


def test_flops_formula():
    for name, p in D.PRESETS.items():
        assert D.forward_flops(p.config, p.batch) == _flops_from_weights(p.config, p.batch), name
        assert D.train_flops(p.config, p.batch) == 3 * D.forward_flops(p.config, p.batch)
    # by hand, for one conv: conv_in of the CIFAR model on 4 images is 2 * 4 * 32*32 * 3*3*3 * 128
    one = replace_config(CIFAR, ch_mult=(1,), num_res_blocks=1, attn_resolutions=())
    blocks = [b for b in D.unet_blocks(one) if b.name == "conv_in"]
    assert 2 * 4 * D._block_macs(blocks[0], one.temb_ch) == 2 * 4 * 32 * 32 * 27 * 128
    # the CIFAR model: about 6.2 G multiply-adds per 32x32 image
    assert D.forward_flops(CIFAR, 1) == 12_443_713_536


# ----------------------------------------------------------------------------- data and tasks

def test_data_is_seeded_and_well_formed():
    x = D.make_images(TINY, 3, seed=4)
    assert x.shape == (3, 16, 16, 3) and x.dtype == np.float32
    assert np.abs(x).max() <= 1 and np.allclose(np.abs(x).max(axis=(1, 2)), 1)
    assert np.abs(np.diff(x, axis=1)).mean() < 0.5           # smooth, not white noise
    np.testing.assert_array_equal(x, D.make_images(TINY, 3, seed=4))
    assert not np.array_equal(x, D.make_images(TINY, 3, seed=5))
    x0, t, noise = D.make_train_batch(TINY, 64, seed=2)
    assert t.dtype == np.int32 and t.shape == (64,) and 0 <= t.min() and t.max() < T
    assert noise.dtype == np.float32 and noise.shape == x0.shape
    for a, b in zip((x0, t, noise), D.make_train_batch(TINY, 64, seed=2)):
        np.testing.assert_array_equal(a, b)
    assert D.make_noise(TINY, (4, 2)).shape == (4, 2, 16, 16, 3)


@pytest.mark.parametrize("task", D.TASKS)
def test_task_spec(task):
    cfg, batch = TINY, 2
    spec = D.task_spec(cfg, batch, task, seed=0)
    assert isinstance(spec, TaskSpec) and len(spec.inputs) == D.POOL
    assert spec.items == batch and spec.unit == "images"
    assert not np.array_equal(spec.inputs[0][0], spec.inputs[1][0])   # rotated inputs differ
    for inp in spec.inputs:
        assert all(a.dtype in (np.float32, np.int32) for a in inp)
    if task == "forward":
        assert spec.method == "eps" and spec.flops == D.forward_flops(cfg, batch)
        assert [a.shape for a in spec.inputs[0]] == [(2, 16, 16, 3), (2,)]
        assert spec.shape == "B=2,16x16"
    elif task == "train_step":
        assert spec.method == "train_step" and spec.flops == D.train_flops(cfg, batch)
        assert [a.shape for a in spec.inputs[0]] == [(2, 16, 16, 3), (2,), (2, 16, 16, 3)]
    else:
        assert spec.method == "sample" and spec.kwargs == {"method": "ddim", "steps": D.SAMPLE_STEPS}
        assert spec.flops == D.SAMPLE_STEPS * D.forward_flops(cfg, batch)
        assert spec.shape == f"B=2,16x16,steps={D.SAMPLE_STEPS}"


def test_optimizer_is_the_papers_adam():
    assert D.OPTIMIZER.lr == 2e-4 and D.OPTIMIZER.weight_decay == 0.0 and D.OPTIMIZER.clip_norm == 1.0
    assert D.decayed("conv_in.weight", (3, 3, 3, 16)) and not D.decayed("conv_in.bias", (16,))


# ----------------------------------------------------------------------------- reference UNet

def test_conv_padding_and_stride_against_a_plain_loop():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 6, 6, 2))
    w = rng.standard_normal((3, 3, 2, 3))
    p = {"c.weight": w, "c.bias": np.arange(3.0)}
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))              # 1 pixel on every side
    for stride in (1, 2):
        out = D._conv(p, "c", x, stride)
        n = 6 // stride
        assert out.shape == (1, n, n, 3)
        want = np.array([[[np.einsum("ijc,ijco->o", xp[0, i * stride:i * stride + 3, j * stride:j * stride + 3], w)
                           for j in range(n)] for i in range(n)]]) + np.arange(3.0)
        np.testing.assert_allclose(out, want, rtol=1e-12)


def test_group_norm_normalises_each_group_of_each_image():
    x = np.random.default_rng(0).standard_normal((2, 4, 4, 8)) * np.arange(1, 9)
    y = D._group_norm({"n.weight": np.ones(8), "n.bias": np.zeros(8)}, "n", x, groups=4)
    g = y.reshape(2, 16, 4, 2)                                     # channels (0,1), (2,3), ...
    np.testing.assert_allclose(g.mean(axis=(1, 3)), 0, atol=1e-12)
    np.testing.assert_allclose(g.var(axis=(1, 3)), 1, rtol=1e-4)


def test_timestep_embedding():
    e = D.timestep_embedding(np.array([0, 1, 999]), 16)
    assert e.shape == (3, 16)
    np.testing.assert_array_equal(e[0], [0] * 8 + [1] * 8)
    freqs = np.exp(-math.log(10000) * np.arange(8) / 7)             # 1 .. 1e-4
    assert freqs[0] == 1 and abs(freqs[-1] - 1e-4) < 1e-16
    np.testing.assert_allclose(e[2], np.concatenate([np.sin(999 * freqs), np.cos(999 * freqs)]))


def test_reference_unet(tiny_params):
    x0, t, noise = D.make_train_batch(TINY, 2, seed=3)
    x = D.q_sample(SCHED, x0, t, noise).astype(np.float32)
    eps = D.reference_eps(TINY, tiny_params, x, t)
    assert eps.shape == x.shape and eps.dtype == np.float64 and np.all(np.isfinite(eps))
    assert 0.1 < eps.std() < 10                                     # an informative output
    # it depends on t (through the embedding) and on every image alone (GroupNorm per image)
    assert np.abs(eps - D.reference_eps(TINY, tiny_params, x, t[::-1].copy())).max() > 1e-3
    one = D.reference_eps(TINY, tiny_params, x[1:], t[1:])
    np.testing.assert_allclose(one, eps[1:], rtol=1e-10, atol=1e-12)
    with pytest.raises(FwbenchError, match="NHWC"):
        D.reference_eps(TINY, tiny_params, x[..., :2], t)
    loss = D.reference_loss(TINY, tiny_params, x0, t, noise)
    assert np.isfinite(loss) and loss > 0.1


def test_reference_sample(tiny_params):
    x_T = D.make_noise(TINY, (2,), seed=8)
    out = D.reference_sample(TINY, tiny_params, x_T, method="ddim", steps=2)
    assert out.shape == x_T.shape and np.all(np.isfinite(out))
    z = D.make_noise(TINY, (2, 2), seed=9)
    ddpm = D.reference_sample(TINY, tiny_params, x_T, z, method="ddpm", steps=2)
    assert ddpm.shape == x_T.shape and np.abs(ddpm - out).max() > 1e-3
    with pytest.raises(FwbenchError, match="needs noise"):
        D.reference_sample(TINY, tiny_params, x_T, method="ddpm", steps=2)
