"""The evidence contract's checker (tests/evidence_contract.py) finds each breach, and only breaches."""

from __future__ import annotations

import dataclasses

from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.timing import RequestTiming
from tests.evidence_contract import check_evidence, check_progress

TOL = 0.1
HOLDS = RequestTiming(
    source="envoy", target="t", lane="fast", request_class="interactive", model="m", ttft_s=0.32, e2e_s=0.4
)


def _check(
    record: RequestTiming, *, streamed: bool = True, upload_s: float = 0.0, first: float | None = 0.3
) -> list[str]:
    return check_evidence(
        record, streamed=streamed, upload_s=upload_s, upstream_first_token_s=first, tolerance_s=TOL
    )


def test_a_streamed_record_that_holds_has_no_breach() -> None:
    assert _check(HOLDS) == []
    assert _check(HOLDS, upload_s=1.5) == []


def test_a_streamed_record_late_early_or_missing_its_ttft_breaches() -> None:
    assert _check(dataclasses.replace(HOLDS, ttft_s=None))[0].startswith("ttft_s:")
    assert "later" in _check(dataclasses.replace(HOLDS, ttft_s=0.45, e2e_s=0.5))[0]
    assert "earlier" in _check(dataclasses.replace(HOLDS, ttft_s=0.1))[0]


def test_an_upload_in_ttft_or_e2e_breaches() -> None:
    late = dataclasses.replace(HOLDS, ttft_s=1.82, e2e_s=1.9)
    found = _check(late, upload_s=1.5)
    assert any(b.startswith("ttft_s:") and "upload" in b for b in found)
    assert any(b.startswith("e2e_s:") and "upload" in b for b in found)


def test_the_probes_client_phases_are_not_the_wait() -> None:
    probe = dataclasses.replace(HOLDS, source="probe", connect_s=0.2, send_s=0.05, ttft_s=0.56, e2e_s=0.6)
    assert _check(probe) == []
    assert "later" in _check(dataclasses.replace(probe, connect_s=0.0, send_s=0.0))[0]


def test_a_non_streamed_record_with_a_ttft_breaches() -> None:
    assert _check(dataclasses.replace(HOLDS, ttft_s=None), streamed=False, first=None) == []
    assert "non-streamed" in _check(dataclasses.replace(HOLDS, ttft_s=0.75, e2e_s=0.75), streamed=False)[0]


def test_progress_of_a_non_streamed_request_breaches() -> None:
    def check(events: list[Progress]) -> list[str]:
        return check_progress(
            events, streamed=False, upload_s=0.0, upstream_first_token_s=None, tolerance_s=TOL
        )

    assert check([]) == []
    assert "non-streamed" in check([Progress(1, "fast", 0.6, False)])[0]


def test_progress_ages_that_hold_the_upload_breach() -> None:
    def check(events: list[Progress]) -> list[str]:
        return check_progress(
            events, streamed=True, upload_s=1.5, upstream_first_token_s=0.02, tolerance_s=TOL
        )

    assert check([Progress(1, "fast", 0.01, False), Progress(1, "fast", 0.02, True)]) == []
    found = check([Progress(1, "fast", 1.2, False), Progress(1, "fast", 1.52, True)])
    assert len(found) == 2 and all("upload" in b for b in found)


def test_progress_without_its_first_token_breaches() -> None:
    found = check_progress(
        [Progress(1, "fast", 0.1, False)],
        streamed=True,
        upload_s=0.0,
        upstream_first_token_s=0.3,
        tolerance_s=TOL,
    )
    assert found == ["progress: no first-token event for a streamed request whose first token came"]
