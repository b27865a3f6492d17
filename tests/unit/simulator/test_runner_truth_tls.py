"""The real-time runner, the ground-truth store and the self-signed certificate."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import time
from pathlib import Path

import pytest
from cryptography import x509

from lanewatch.simulator import tls
from lanewatch.simulator.engine import Engine, EngineConfig, EngineRequest, StepCost
from lanewatch.simulator.runner import ABORTED, EngineRunner, Token
from lanewatch.simulator.truth import TruthRecord, TruthStore

STEP_S = 0.01
CONFIG = EngineConfig(
    max_num_seqs=8,
    max_num_batched_tokens=256,
    num_kv_blocks=1000,
    block_size=16,
    max_model_len=4096,
    cost=StepCost(overhead_s=STEP_S, per_seq_overhead_s=0, weights_s=0, token_s=0, kv_token_s=0),
)


async def drain(queue: asyncio.Queue[Token]) -> list[Token]:
    out = []
    while True:
        tok = await queue.get()
        out.append(tok)
        if tok.index < 0 or tok.times is not None:
            return out


async def test_runner_steps_in_real_time_and_batches() -> None:
    runner = EngineRunner(Engine(CONFIG))
    runner.start()
    try:
        start = time.perf_counter()
        queues = [runner.submit(EngineRequest(f"r{i}", [i, 1, 2], 20, start)) for i in range(3)]
        results = await asyncio.gather(*(drain(q) for q in queues))
        elapsed = time.perf_counter() - start
    finally:
        await runner.shutdown()
    for toks in results:
        assert [t.index for t in toks] == list(range(20))
        assert toks[-1].times is not None
    # Three requests batched: each token of the three came out of the same step, 20 steps in
    # all, not 60 (the steps themselves, not a wall-clock bound a busy host can break), and
    # in real time: the 20 steps of 10 ms took at least their 0.2 s.
    steps = [{toks[i].at_s for toks in results} for i in range(20)]
    assert all(len(same) == 1 for same in steps), steps
    assert len({t.at_s for toks in results for t in toks}) == 20
    assert elapsed > 0.19
    assert runner.in_flight == 0


async def test_abort_ends_the_stream() -> None:
    runner = EngineRunner(Engine(CONFIG))
    runner.start()
    try:
        queue = runner.submit(EngineRequest("a", [1, 2, 3], 1000, time.perf_counter()))
        await queue.get()
        runner.abort("a")
        toks = await drain(queue)
    finally:
        await runner.shutdown()
    assert toks[-1] is ABORTED
    assert not runner.engine.has_work


def record(rid: str) -> TruthRecord:
    return TruthRecord(rid, None, 0.0, 0.0, 0.0, 0.1, 0.0, 0.2, 3, 4, "length", 200)


def test_truth_store_keeps_the_latest_and_finds_response_ids() -> None:
    store = TruthStore(capacity=3)
    for i in range(5):
        store.add(record(f"r{i}"))
    assert len(store) == 3 and store.get("r0") is None and store.get("r4") is not None
    assert store.get("chatcmpl-r3") == store.get("r3") == store.get("cmpl-r3")
    assert store.get("chatcmpl-zz") is None
    assert record("x").to_json()["finished_reason"] == "length"


def test_certificate_names_loopback_and_is_its_own_ca() -> None:
    pair = tls.self_signed()
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert b"PRIVATE KEY" in pair.key_pem and b"PRIVATE KEY" not in pair.cert_pem
    key_file = tls.private_key_file(pair)
    try:
        assert key_file.stat().st_mode & 0o077 == 0  # only the owner can read it
    finally:
        key_file.unlink()
        key_file.parent.rmdir()


def test_the_certificate_file_appears_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo polls for the file and loads it the moment it exists: a half-written one failed
    # its start ("no certificate found") on a loaded machine.
    pair = tls.self_signed()
    path = tmp_path / "certs" / "slow-cert.pem"
    seen: list[bytes | None] = []
    replace = os.replace

    def watch(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.append(path.read_bytes() if path.exists() else None)  # what a reader sees just before
        assert Path(src).read_bytes() == pair.cert_pem  # the whole certificate is in place first
        replace(src, dst)

    monkeypatch.setattr(os, "replace", watch)
    tls.write_cert(pair, path)
    tls.write_cert(pair, path)  # again over the first
    assert seen == [None, pair.cert_pem]
    assert path.read_bytes() == pair.cert_pem and sorted(p.name for p in path.parent.iterdir()) == [path.name]
