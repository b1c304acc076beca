"""diffusers: a tiny UNet2DConditionModel and AutoencoderKL (random weights, the configs of diffusers' own tests)
and a 3-step DDIM denoising loop that passes the UNet Python-int timesteps, compiled as users compile them.

torch.compile makes 2 graphs of the UNet over the 3 steps: the first timestep is a constant, the second makes it a
symbolic int (automatic dynamic), the third compiles nothing. framejit makes 3 (see UNET_LOOP_GAP)."""

from __future__ import annotations

import warnings

import pytest
import torch

import framejit
from framejit.testing import CompileCounter
from tests.reallibs.compare import (
    assert_not_more_graphs,
    import_or_skip,
    run_framejit,
    run_torch_compile,
)
from tests.reliability.many_calls import CALLS, inputs_for, one_thread  # noqa: F401 (a fixture)

diffusers = import_or_skip("diffusers")

STEPS = 3
TOL = {"rtol": 1e-4, "atol": 1e-5}
# graphs after each of the 3 denoising steps
UNET_LOOP_GRAPHS = {"framejit": [1, 2, 2], "torch.compile": [1, 2, 2]}  # the timestep is symbolic from step 2


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def tiny_unet() -> torch.nn.Module:
    torch.manual_seed(0)
    return diffusers.UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        block_out_channels=(32, 64),
        layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        norm_num_groups=32,
    ).eval()


def tiny_vae() -> torch.nn.Module:
    torch.manual_seed(0)
    return diffusers.AutoencoderKL(
        block_out_channels=[32, 64],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
        latent_channels=4,
        norm_num_groups=32,
    ).eval()


def prompt_embedding() -> torch.Tensor:
    return torch.randn(1, 5, 32, generator=torch.Generator().manual_seed(1))


def state_latents() -> torch.Tensor:
    return torch.randn(1, 4, 8, 8)


def denoising_steps(steps: int = STEPS) -> list:
    """The steps of a DDIM loop, each a call of the (compiled) UNet with a Python-int timestep; each returns the
    latents after that step. The loop's state (the scheduler and the latents) is shared by the steps."""
    scheduler = diffusers.DDIMScheduler(num_train_timesteps=1000)
    scheduler.set_timesteps(steps)
    state = {"latents": torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))}
    embedding = prompt_embedding()

    def make_step(t: torch.Tensor):
        def step(unet):
            with torch.no_grad():
                noise = unet(state["latents"], int(t), encoder_hidden_states=embedding).sample
                state["latents"] = scheduler.step(noise, t, state["latents"]).prev_sample
            return state["latents"]

        return step

    return [make_step(t) for t in scheduler.timesteps]


def test_unet_is_one_graph_equal_to_eager():
    unet = tiny_unet()
    latents, embedding, counter = state_latents(), prompt_embedding(), CompileCounter()
    with torch.no_grad():
        want = unet(latents, 999, encoder_hidden_states=embedding).sample
        got = framejit.optimize(counter, nopython=True)(unet)(latents, 999, encoder_hidden_states=embedding).sample
    torch.testing.assert_close(got, want, **TOL)
    assert counter.frame_count == 1


@pytest.mark.slow
def test_unet_denoising_loop_matches_eager():
    unet = tiny_unet()
    want = [step(unet) for step in denoising_steps()]
    run = run_framejit(unet, denoising_steps())
    torch.testing.assert_close(run.results, want, **TOL)
    assert run.counts == UNET_LOOP_GRAPHS["framejit"]
    assert run.recompiles[0].startswith("L['args'][1]: value changed to 333")
    explained = framejit.explain(unet)(state_latents(), 999, encoder_hidden_states=prompt_embedding())
    assert explained.graph_count == 1 and not explained.break_reasons


@pytest.mark.slow
def test_unet_denoising_loop_graphs_against_torch_compile():
    unet = tiny_unet()
    want = [step(unet) for step in denoising_steps()]
    theirs = run_torch_compile(unet, denoising_steps())
    ours = run_framejit(unet, denoising_steps())
    torch.testing.assert_close(theirs.results, want, **TOL)
    torch.testing.assert_close(ours.results, want, **TOL)
    assert theirs.counts == UNET_LOOP_GRAPHS["torch.compile"]
    assert_not_more_graphs(ours.counts, theirs.counts)


def vae_steps(images: list[torch.Tensor]) -> list:
    def make_step(image):
        def step(vae):
            with torch.no_grad():
                return vae(image).sample

        return step

    return [make_step(image) for image in images]


def images(n: int = 2) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(2)
    return [torch.randn(1, 3, 16, 16, generator=generator) for _ in range(n)]


def test_vae_is_one_graph_equal_to_eager():
    vae = tiny_vae()
    want = [step(vae) for step in vae_steps(images())]
    run = run_framejit(vae, vae_steps(images()), nopython=True)
    torch.testing.assert_close(run.results, want, **TOL)
    assert run.counts == [1, 1]


@pytest.mark.slow
def test_vae_graphs_against_torch_compile():
    vae = tiny_vae()
    theirs = run_torch_compile(vae, vae_steps(images()))
    ours = run_framejit(vae, vae_steps(images()))
    torch.testing.assert_close(ours.results, theirs.results, **TOL)
    assert theirs.counts == [1, 1]
    assert_not_more_graphs(ours.counts, theirs.counts)


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_unet_called_100_times_with_the_loop_s_timesteps():
    """The three timesteps of the loop, over and over: two graphs (the timestep symbolic from the second), then
    none."""
    unet = tiny_unet()
    scheduler = diffusers.DDIMScheduler(num_train_timesteps=1000)
    scheduler.set_timesteps(STEPS)
    timesteps = [int(t) for t in scheduler.timesteps]
    counter = CompileCounter()
    compiled = framejit.optimize(counter)(unet)
    embedding = prompt_embedding()
    latents = None
    with torch.no_grad():
        for call in range(CALLS):
            latents = inputs_for(call, latents, state_latents)
            t = timesteps[call % len(timesteps)]
            want = unet(latents, t, encoder_hidden_states=embedding).sample
            got = compiled(latents, t, encoder_hidden_states=embedding).sample
            torch.testing.assert_close(got, want, **TOL, msg=lambda m: f"call {call}: {m}")
            if call == len(timesteps) - 1:
                warm = counter.frame_count
    assert counter.frame_count == warm == UNET_LOOP_GRAPHS["framejit"][-1]


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_vae_called_100_times():
    vae = tiny_vae()
    counter = CompileCounter()
    compiled = framejit.optimize(counter, nopython=True)(vae)
    image = None
    with torch.no_grad():
        for call in range(CALLS):
            image = inputs_for(call, image, lambda: torch.randn(1, 3, 16, 16))
            torch.testing.assert_close(
                compiled(image).sample, vae(image).sample, **TOL, msg=lambda m: f"call {call}: {m}"
            )
    assert counter.frame_count == 1
