"""One engine, many clients: fair queueing, a bounded queue, and disconnects that cancel generations."""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import openai
import pytest

from tests.server.conftest import N_CTX, openai_queue, wait_until

HELLO = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there! How are you?"}]
# With this seed the tiny model talks past the context (879 tokens at n_ctx 2048): a reply that only a
# cancel ends early.
LONG = {"messages": HELLO, "seed": 2, "max_tokens": N_CTX - 40}
SHORT = {"messages": HELLO, "max_tokens": 4}


def _async_openai(server) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=240,
                              http_client=httpx.AsyncClient(limits=httpx.Limits(max_connections=100)))


def test_a_client_that_disconnects_mid_stream_cancels_its_generation(serve, model_name):
    server = serve(stream_every_s=0)  # every token its own chunk: the tiny model's reply is over in a few 40 ms ones
    queue = openai_queue(server)

    async def scenario():
        async with _async_openai(server) as client:
            stream = await client.chat.completions.create(model=model_name, stream=True, **LONG)
            seen = 0
            async for chunk in stream:
                seen += bool(chunk.choices and chunk.choices[0].delta.content)
                if seen == 2:
                    break
            await stream.close()  # closes the connection mid-stream
            await wait_until(lambda: queue.finished_count == 1)
            after = await client.chat.completions.create(model=model_name, **SHORT)
            return after

    after = asyncio.run(scenario())
    cancelled = queue.outcomes()[0]
    assert cancelled.stop_reason == "cancelled" and cancelled.generated_tokens < LONG["max_tokens"]
    assert after.choices[0].finish_reason in ("stop", "length") and after.usage.completion_tokens >= 1


def test_a_client_that_disconnects_from_a_whole_reply_cancels_it_too(server, model_name):
    queue = openai_queue(server)

    async def scenario():
        async with _async_openai(server) as client:
            waiting = asyncio.create_task(client.chat.completions.create(model=model_name, **LONG))
            # delivered is not yet generating: a cancel that reaches the engine first skips the job instead
            await wait_until(lambda: queue.running is not None and queue.running.generated_tokens > 0)
            waiting.cancel()  # the HTTP request is abandoned while the engine generates
            await wait_until(lambda: queue.finished_count == 1)

    asyncio.run(scenario())
    assert queue.outcomes()[0].stop_reason == "cancelled"
    assert queue.outcomes()[0].generated_tokens < LONG["max_tokens"]


def test_requests_run_in_arrival_order_and_a_full_queue_answers_503(serve, gated, model_name):
    server = serve(gated, max_pending=3)
    queue = openai_queue(server)
    url = f"{server.url}/v1/chat/completions"

    async def scenario():
        async with httpx.AsyncClient(timeout=240) as http:
            def post(body):
                return asyncio.create_task(http.post(url, json=body))

            first = post(SHORT)
            await wait_until(lambda: queue.busy)  # running, held at the gate
            leaver = post(SHORT)
            await wait_until(lambda: len(queue.waiting()) == 1)
            last = post({**SHORT, "max_tokens": 3})
            await wait_until(lambda: len(queue.waiting()) == 2)
            refused = await http.post(url, json=SHORT)
            leaver.cancel()  # a client that gives up while queued
            await wait_until(lambda: [job.cancelled.is_set() for job in queue.waiting()] == [True, False])
            gated.gate.set()
            done = await asyncio.gather(first, last)
            await wait_until(lambda: server.active_requests == 0)  # the abandoned handler ended too
            # A reply goes out when its Done is pushed; the worker records the outcome just after.
            await wait_until(lambda: len(queue.outcomes()) == 3)
            return refused, done

    refused, (first, last) = asyncio.run(scenario())
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "queue_full"
    assert first.status_code == last.status_code == 200
    assert last.json()["usage"]["completion_tokens"] <= 3
    # First come, first served; the one that left was skipped without reaching the engine.
    outcomes = queue.outcomes()
    first_id = int(outcomes[0].job_id.removeprefix("q"))
    assert [o.job_id for o in outcomes] == [f"q{first_id + i}" for i in range(3)]
    assert outcomes[1].stop_reason == "skipped" and outcomes[0].stop_reason != "skipped" != outcomes[2].stop_reason
    assert httpx.get(f"{server.url}/health").json()["pending"] == 0


@pytest.mark.timeout(600)
def test_50_streaming_clients_with_random_disconnects_leave_the_server_healthy(serve, engine, model_name):
    server = serve(max_pending=64, stream_every_s=0)  # every token its own chunk, so a client can leave anywhere
    queue = openai_queue(server)
    pid = engine.pid
    rng = random.Random(20261)
    plans = [(rng.choice(["finish", "drop_mid_stream", "drop_any_time"]), rng.randint(1, 3), rng.uniform(0, 2))
             for _ in range(50)]

    async def one_client(client, plan):
        mode, chunks_before_drop, patience = plan
        if mode == "drop_any_time":  # gives up after a random while: queued, mid-stream or already done
            try:
                return await asyncio.wait_for(one_client(client, ("finish", 0, 0)), patience)
            except TimeoutError:
                return "dropped"
        body = LONG if mode == "drop_mid_stream" else {**SHORT, "seed": rng.randint(0, 1000)}
        stream = await client.chat.completions.create(model=model_name, stream=True, **body)
        content = 0
        finish = None
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                content += 1
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
            if mode == "drop_mid_stream" and content == chunks_before_drop:
                await stream.close()
                return "dropped mid-stream"
        return finish

    async def scenario():
        async with _async_openai(server) as client:
            results = await asyncio.gather(*(one_client(client, plan) for plan in plans))
            await wait_until(lambda: queue.pending == 0 and not queue.busy, timeout=240)
            await wait_until(lambda: server.active_requests == 0)  # no handler left waiting or streaming
            outcomes = queue.outcomes()
            after = await client.chat.completions.create(model=model_name, **SHORT)
            return results, outcomes, after

    results, outcomes, after = asyncio.run(scenario())
    modes = [mode for mode, _, _ in plans]
    for mode, result in zip(modes, results, strict=True):
        expected = {"finish": {"stop", "length"}, "drop_mid_stream": {"dropped mid-stream"},
                    "drop_any_time": {"stop", "length", "dropped"}}[mode]
        assert result in expected, (mode, result)
    assert len(outcomes) <= 50 and queue.finished_count == len(outcomes) + 1  # each job ended exactly once
    cancelled = [o for o in outcomes if o.stop_reason == "cancelled"]
    assert len(cancelled) >= modes.count("drop_mid_stream")  # each reply a client left was stopped
    assert all(o.generated_tokens < LONG["max_tokens"] for o in cancelled)
    assert not [o for o in outcomes if o.stop_reason == "error"]
    # Healthy afterwards: the same engine process answers a normal request.
    assert after.choices[0].finish_reason in ("stop", "length")
    assert engine.alive and engine.pid == pid
    assert httpx.get(f"{server.url}/health").json()["status"] == "ok"


def test_api_requests_reach_the_engines_queue_at_once_so_the_chat_gets_in_line_behind_them(serve, tiny_models):
    """One queue, the engine host's: a request the server accepted is already in line there, so a chat request
    made after it waits behind it (with two queues in series the chat could overtake it)."""
    import threading

    from app.engine.client import EngineClient
    from app.datatypes import Done, LoadSettings, Message, SamplingSettings

    with EngineClient() as engine:
        engine.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=16384))  # room for a reply that only a cancel ends
        server = serve(engine)
        queue = openai_queue(server)
        url = f"{server.url}/v1/chat/completions"
        running, stop_running, answers = threading.Event(), threading.Event(), {}

        def long_stream():
            with httpx.stream("POST", url, timeout=240, json={"messages": HELLO, "max_tokens": 16000,
                                                              "stream": True, "seed": 2}) as response:
                for _line in response.iter_lines():
                    running.set()
                    if stop_running.is_set():
                        return  # hangs up: the server cancels it

        def short():
            answers["short"] = httpx.post(url, timeout=240, json=SHORT)

        threads = [threading.Thread(target=long_stream, daemon=True)]
        threads[0].start()
        assert running.wait(120)
        threads.append(threading.Thread(target=short, daemon=True))
        threads[1].start()
        asyncio.run(wait_until(lambda: [job.stream is not None for job in queue.waiting()] == [True]))  # sent
        ahead: list[int] = []
        chat = engine.generate([Message("user", "Hi")], SamplingSettings(max_tokens=3), on_wait=ahead.append)
        assert ahead == [2]  # the running API request and the waiting one
        stop_running.set()
        done = [event for event in chat if isinstance(event, Done)][0]
        for thread in threads:
            thread.join(120)
        assert done.stats.generated_tokens == 3
        assert answers["short"].status_code == 200
        assert [o.stop_reason for o in queue.outcomes()][0] == "cancelled"


def test_a_client_gone_before_its_stream_starts_gives_its_model_back(serve, tiny_models, tmp_path, monkeypatch):
    """The client leaves after the first token exists but before the response's body starts: Starlette then
    cancels the response before it runs the body's generator, whose own ``finally`` never runs. The lease on the
    model must be let go all the same, or an on-demand model stays "in use" and never unloads. (Driven at the ASGI
    level: the moment is too short to hit through a socket.)"""
    from app.hub.library import Library
    from app.server.router import ServeSettings
    from app.datatypes import LoadSettings

    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    Library().import_path(tiny_models.gguf_f16, copy=False)
    server = serve(pool=ServeSettings(load_on_demand=True, load=LoadSettings(n_ctx=N_CTX)))
    body = json.dumps({"model": "tiny-llama-F16", "stream": True, **SHORT}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
             "query_string": b"", "root_path": "", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 50000),
             "headers": [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    sent: list[dict] = []

    async def scenario():
        receives = 0
        never = asyncio.Event()

        async def receive():
            nonlocal receives
            receives += 1
            if receives == 1:
                return {"type": "http.request", "body": body, "more_body": False}
            if receives == 2:  # the disconnect watcher: the client is still there while the first token comes
                await never.wait()
            return {"type": "http.disconnect"}  # the response's own listener: gone before the first chunk

        async def send(message):
            sent.append(message)
            await asyncio.sleep(0)  # the transport waits (as uvicorn's does when the socket's buffer is full)

        await server.app(scope, receive, send)

    asyncio.run(scenario())
    pool = server.app.state.openai.pool
    engine, = pool.loaded_engines()
    assert engine.served == "tiny-llama-F16" and engine.users == 0
    assert not any(m["type"] == "http.response.body" and m.get("body") for m in sent)


def test_a_server_started_again_over_the_same_engine_is_not_hit_by_a_cancel_the_last_one_sent_late(serve, engine):
    """A client leaving just as its reply ends sends the engine a cancel that crosses the reply's Done; the host keeps
    a cancel for an id it has not seen (it may arrive before its request). A server started again over the same host
    (the app's Server switch over the Chat's engine) must not give its first request that id, or it ends unrun
    (this failed as 'the client went away while the request was queued' when the ids counted per queue)."""
    first = serve()
    answered = httpx.post(f"{first.url}/v1/chat/completions", json=SHORT, timeout=120)
    assert answered.status_code == 200
    asyncio.run(wait_until(lambda: len(openai_queue(first).outcomes()) == 1))  # recorded just after the reply
    engine.cancel(openai_queue(first).outcomes()[0].job_id)  # the late cancel of a request already over
    first.stop()
    again = serve()
    reply = httpx.post(f"{again.url}/v1/chat/completions", json=SHORT, timeout=120)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] > 0
