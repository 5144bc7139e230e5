"""The real GGUF (SmolLM2-135M-Instruct, Q4_1) served by radixlm equals transformers'
``from_pretrained(folder, gguf_file=...)`` on the same file: prefill logits, greedy tokens at
page sizes 1 and 16, the same with every linear on one native float32 kernel (the panel GEMM,
the AMX GEMM: each alone, whatever the load-time measurement would pick), and a radix-cache
hit giving the tokens of a cold run.

Bounded on purpose (30 layers on one CPU thread): three short chat prompts, 16 new tokens.
"""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.f32_amx_fx24_gemm import f32_amx_fx24_available
from radixlm.kernels.cpu.f32_amx_gemm import f32_amx_gemm_available
from radixlm.kernels.cpu.f32_panel_gemm import f32_panel_gemm_available
from radixlm.runtime.api.engine import Engine
from radixlm.runtime.model import quantized_linear
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate
from radixlm.testing.prefill_oracle import assert_prefill_matches_hf, hf_greedy_tokens

QUESTIONS = ["What is the capital of France?", "Name three colors.",
             'Write the JSON {"a": 1} and nothing else.']
NEW_TOKENS = 16
REL_TOL = 1e-4  # max |ours - transformers| relative to max |transformers logit|


@pytest.fixture(scope="module")
def hf(real_model_hf):
    return real_model_hf


@pytest.fixture(scope="module")
def prompts(real_model_hf_tokenizer) -> list[list[int]]:
    return [real_model_hf_tokenizer.apply_chat_template(
        [{"role": "user", "content": q}], tokenize=True, add_generation_prompt=True,
        return_dict=False) for q in QUESTIONS]


@pytest.fixture(scope="module")
def hf_greedy(hf, prompts) -> list[list[int]]:
    return hf_greedy_tokens(hf, prompts, NEW_TOKENS, eos_token_id=2, pad_token_id=2)


@pytest.fixture
def gguf_env(real_model, monkeypatch):
    """``RADIXLM_CACHE_DIR`` where the session converted the file: the .gguf path loads fast."""
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(real_model.cache_dir))
    return real_model


def runner_for(real_model, page_size: int) -> ModelRunner:
    return ModelRunner(real_model.gguf, RunnerConfig(page_size=page_size, max_total_tokens=512))


@pytest.mark.parametrize("page_size", [1, 16])
def test_prefill_logits_match_transformers(gguf_env, hf, prompts, page_size):
    assert_prefill_matches(runner_for(gguf_env, page_size), hf, prompts)


def assert_prefill_matches(runner: ModelRunner, hf, prompts: list[list[int]]) -> None:
    """The prompts' prefill logits, all rows, within REL_TOL of transformers'."""
    assert runner.model_config.num_layers == 30 and runner.vocab_size == 49152
    assert_prefill_matches_hf(runner, hf, prompts, REL_TOL, min_std=1.0)


@pytest.mark.parametrize("page_size", [1, 16])
def test_greedy_tokens_match_transformers(gguf_env, prompts, hf_greedy, page_size):
    runner = runner_for(gguf_env, page_size)
    ours = greedy_generate(runner, prompts, NEW_TOKENS, stop_token_ids=[2])
    assert ours == hf_greedy
    assert any(len(set(out)) > 3 for out in ours), "the model must say something"


NATIVE_F32 = {"f32-panel": f32_panel_gemm_available(), "f32-amx": f32_amx_gemm_available(),
              "f32-amx-fx24": f32_amx_fx24_available()}


@pytest.mark.parametrize("kernel", sorted(NATIVE_F32))
def test_one_native_float32_kernel_everywhere_matches_transformers(
        gguf_env, hf, prompts, hf_greedy, kernel, monkeypatch):
    """Every projection and the LM head on that kernel alone, at every row count (the three
    prompts' prefill rows, then decode steps of three rows and fewer): the oracle's logits and
    greedy tokens."""
    if not NATIVE_F32[kernel]:
        pytest.skip(f"{kernel}: the native kernel is not built or this CPU lacks its "
                    "instructions (AVX-512 F; AMX-BF16 for f32-amx, AMX-INT8 for "
                    "f32-amx-fx24)")
    offered = quantized_linear.float_impls

    def only(weight, allow_onednn=True, arena=None):  # noqa: ANN001, ANN202
        return {kernel: offered(weight, allow_onednn, arena)[kernel]}
    monkeypatch.setattr(quantized_linear, "float_impls", only)
    runner = runner_for(gguf_env, 1)
    assert runner.model.layers[0].mlp.gate_up_proj.plan.used == {kernel}
    assert runner.model.head.plan.used == {kernel}
    assert_prefill_matches(runner, hf, prompts)
    assert greedy_generate(runner, prompts, NEW_TOKENS, stop_token_ids=[2]) == hf_greedy


@pytest.mark.parametrize("quantization", ["none", "gguf"])
def test_prefix_cache_hit_gives_the_cold_runs_tokens(gguf_env, prompts, hf_greedy,
                                                    quantization):
    """Float32 (``none``) gives transformers' tokens; the default, the file's own blocks,
    gives the tokens of its own runner (llama.cpp's numerics, see the test above), cold or
    warm."""
    greedy = {"temperature": 0, "max_new_tokens": NEW_TOKENS}
    expected = hf_greedy
    if quantization == "gguf":
        runner = ModelRunner(gguf_env.gguf, RunnerConfig(max_total_tokens=512,
                                                         quantization="gguf"))
        expected = greedy_generate(runner, prompts[:2], NEW_TOKENS, stop_token_ids=[2])
    with Engine(model_path=str(gguf_env.gguf), page_size=16, max_total_tokens=2048,
                quantization=quantization) as engine:
        cold = engine.generate(input_ids=prompts[0], sampling_params=greedy)
        warm = engine.generate(input_ids=prompts[0], sampling_params=greedy)
        # Another question under the same ChatML system prompt: a partial prefix hit.
        other = engine.generate(input_ids=prompts[1], sampling_params=greedy)
    assert cold["meta_info"]["cached_tokens"] == 0
    assert warm["meta_info"]["cached_tokens"] >= len(prompts[0]) - 16
    assert other["meta_info"]["cached_tokens"] > 0
    assert cold["output_ids"] == warm["output_ids"] == expected[0]
    assert other["output_ids"] == expected[1]


def test_default_settings_run_the_files_own_bits_and_write_no_float32_copy(gguf_env):
    """The Engine's default for a .gguf (the test above runs it): the file's own blocks,
    read from its map; the cache holds config and tokenizer only, a few MiB."""
    from radixlm.runtime.server_args import ServerArgs

    args = ServerArgs(model_path=str(gguf_env.gguf)).with_local_checkpoint()
    quantization, why = args.resolved_quantization
    assert quantization == "gguf" and "by default" in why
    assert not list(gguf_env.cache_dir.rglob("*.safetensors"))
    folder = gguf_env.folder
    assert sum(f.stat().st_size for f in folder.iterdir()) < 16 * 2**20


# max |ours - llama.cpp| over a step's logits, relative to llama.cpp's largest |logit| there;
# measured on these prompts: 0.056 with the passes of 8 (the default), 0.091-0.14 with the
# tiles (TILES_DEFAULT off: see its comment)
LLAMA_CPP_TOL = 0.12
MIN_STEPS = 24  # of the 44 the three answers take


def llama_cpp_greedy(llm, prompt: list[int]) -> tuple[list[int], list[torch.Tensor]]:
    """llama.cpp's greedy tokens for ``prompt`` and the logits row each was taken from."""
    llm.reset()
    llm.eval(prompt)
    tokens: list[int] = []
    logits: list[torch.Tensor] = []
    while len(tokens) < NEW_TOKENS and (not tokens or tokens[-1] != 2):
        logits.append(torch.from_numpy(llm.scores[llm.n_tokens - 1].copy()))
        tokens.append(llm.sample(temp=0.0))
        llm.eval([tokens[-1]])
    return tokens, logits


def test_own_bits_give_llama_cpps_logits_and_greedy_tokens_away_from_ties(gguf_env, prompts):
    """On the file's own blocks radixlm computes as llama.cpp does (int8 activations per
    block), in another float32 summation order: each step's logits within LLAMA_CPP_TOL of
    llama.cpp's scale, and the same greedy token, until the first step where the two engines
    pick differently, which must be a near tie (llama.cpp's top two logits within twice the
    tolerance, where an error within it can swap them). Past that step the continuations
    differ, so the comparison stops; at least MIN_STEPS steps are compared. llama.cpp is a
    benchmark dependency (``pip install llama-cpp-python==0.3.36``); without it this test
    skips."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed "
                                    "(a benchmark dependency: pip install llama-cpp-python)")
    llm = llama_cpp.Llama(model_path=str(gguf_env.gguf), n_ctx=512, n_threads=1,
                          logits_all=True, verbose=False)
    runner = ModelRunner(gguf_env.gguf, RunnerConfig(max_total_tokens=512, quantization="gguf"))
    step_logits: list[list[torch.Tensor]] = [[] for _ in prompts]
    ours = greedy_generate(runner, prompts, NEW_TOKENS, stop_token_ids=[2],
                           step_logits=step_logits)
    compared = 0
    for prompt, got, got_logits in zip(prompts, ours, step_logits):
        want, want_logits = llama_cpp_greedy(llm, prompt)
        for step, (a, b) in enumerate(zip(got_logits, want_logits)):
            scale = b.abs().max().item()
            error = (a - b).abs().max().item()
            assert error <= LLAMA_CPP_TOL * scale, (step, error, scale)
            compared += 1
            if got[step] != want[step]:
                top = b.topk(2).values
                margin = (top[0] - top[1]).item()
                assert margin <= 2 * LLAMA_CPP_TOL * scale, (step, got, want, margin, scale)
                break
        else:
            assert got == want
    assert compared >= MIN_STEPS, compared
