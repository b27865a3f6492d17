"""The tests' one waiting helper keeps its contract."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.waiting import eventually, eventually_async, settled


def test_eventually_returns_the_first_truthy_result() -> None:
    counter = itertools.count()
    assert eventually(lambda: max(next(counter) - 2, 0), 5, "a count past 2", every_s=0.001) == 1


def test_eventually_fails_naming_what_and_the_context() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"not within 0\.1 s: the moon\nlog tail"):
        eventually(lambda: 0, 0.1, "the moon", every_s=0.01, context=lambda: "log tail")
    assert time.monotonic() - started >= 0.1


def test_eventually_lets_an_error_from_the_check_through() -> None:
    def died() -> bool:
        raise RuntimeError("the process exited")

    with pytest.raises(RuntimeError, match="exited"):
        eventually(died, 5, "never")


async def test_eventually_async_polls_on_the_loop() -> None:
    counter = itertools.count()
    assert await eventually_async(lambda: next(counter) >= 3, 5, "three polls", every_s=0.001) is True
    with pytest.raises(AssertionError, match=r"not within 0\.05 s: nothing"):
        await eventually_async(lambda: None, 0.05, "nothing", every_s=0.01)


def test_settled_waits_for_a_value_that_stops_changing() -> None:
    values = iter([1, 2, 3])
    assert settled(lambda: next(values, 3), 0.05, 5, "a count that stops", every_s=0.005) == 3
    moving = itertools.count()
    with pytest.raises(AssertionError, match="still changing"):
        settled(lambda: next(moving), 0.05, 0.2, "a count that never stops", every_s=0.005)
