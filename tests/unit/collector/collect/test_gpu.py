from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from lanewatch.collector.collect.gpu import GpuSampler, main, peak_hbm_bandwidth


class FakeNvml:
    """The slice of pynvml's API the sampler uses, with pynvml's constants and shapes."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_SUCCESS = pynvml.NVML_SUCCESS
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    NVML_GPM_METRIC_DRAM_BW_UTIL = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL

    def __init__(self, gpus: int = 1, gpm: bool = True, no_power: bool = False, broken: bool = False) -> None:
        self.gpus, self.gpm, self.no_power, self.broken = gpus, gpm, no_power, broken
        self.dram_util = [37.5, 80.0]
        self.gpm_requests: list[Any] = []
        self.freed = 0
        self.ticks = 0
        self.shutdown = False

    def nvmlInit(self) -> None:
        if self.broken:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"h{i}"

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return f"GPU-{h}"

    def nvmlDeviceGetName(self, h: str) -> bytes:
        return b"NVIDIA H200"  # older bindings return bytes

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        return SimpleNamespace(total=150_000_000_000, used=90_000_000_000, free=60_000_000_000)

    def nvmlDeviceGetMemoryBusWidth(self, h: str) -> int:
        return 6144

    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> int:
        return {self.NVML_CLOCK_MEM: 2619, self.NVML_CLOCK_SM: 1980}[kind]

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:
        return {self.NVML_CLOCK_MEM: 2619, self.NVML_CLOCK_SM: 1755}[kind]

    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any:
        return SimpleNamespace(gpu=92, memory=40)

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        if self.no_power:
            raise self.NVMLError("Not Supported")
        return 512_345

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 61

    def nvmlGpmQueryDeviceSupport(self, h: str) -> Any:
        return SimpleNamespace(isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self) -> dict[str, Any]:
        return {"at": None}

    def nvmlGpmSampleFree(self, s: dict[str, Any]) -> None:
        self.freed += 1

    def nvmlGpmSampleGet(self, h: str, s: dict[str, Any]) -> dict[str, Any]:
        self.ticks += 1
        s["at"] = self.ticks
        return s

    def c_nvmlGpmMetricsGet_t(self) -> Any:
        metric = SimpleNamespace(metricId=0, nvmlReturn=self.NVML_SUCCESS, value=0.0)
        return SimpleNamespace(version=0, numMetrics=0, sample1=None, sample2=None, metrics=[metric])

    def nvmlGpmMetricsGet(self, req: Any) -> Any:
        assert req.version == self.NVML_GPM_METRICS_GET_VERSION and req.numMetrics == 1
        assert req.sample1 is not req.sample2
        assert req.metrics[0].metricId == self.NVML_GPM_METRIC_DRAM_BW_UTIL
        self.gpm_requests.append(req)
        req.metrics[0].value = self.dram_util[(len(self.gpm_requests) - 1) % len(self.dram_util)]
        return req


def test_peak_bandwidth_formula() -> None:
    # 6144-bit HBM at 2619 MHz: 768 bytes × 2.619 GHz × 2
    assert peak_hbm_bandwidth(6144, 2619) == pytest.approx(768 * 2.619e9 * 2)


def test_sample_converts_units() -> None:
    nvml = FakeNvml()
    sampler = GpuSampler(nvml)
    assert sampler.start()
    s = sampler.sample()[0]
    assert (s.index, s.uuid, s.name) == (0, "GPU-h0", "NVIDIA H200")
    assert s.utilization_ratio == pytest.approx(0.92)
    assert (s.memory_used_bytes, s.memory_total_bytes) == (90e9, 150e9)
    assert s.power_watts == pytest.approx(512.345)
    assert s.temperature_celsius == 61
    assert (s.sm_clock_hertz, s.memory_clock_hertz) == (1755e6, 2619e6)
    assert s.hbm_bandwidth_peak_bytes_per_second == pytest.approx(peak_hbm_bandwidth(6144, 2619))
    assert s.dram_bandwidth_utilization_ratio is None  # GPM needs a previous sample


def test_gpm_dram_utilization_between_consecutive_samples() -> None:
    nvml = FakeNvml(gpus=2)
    sampler = GpuSampler(nvml)
    sampler.start()
    sampler.sample()
    second = sampler.sample()
    assert [s.dram_bandwidth_utilization_ratio for s in second] == [0.375, 0.8]
    req = nvml.gpm_requests[0]
    assert req.sample1["at"] < req.sample2["at"]  # the older sample is sample1
    sampler.shutdown()
    assert nvml.freed == 4 and nvml.shutdown


def test_unsupported_fields_are_none() -> None:
    sampler = GpuSampler(FakeNvml(gpm=False, no_power=True))
    sampler.start()
    sampler.sample()
    s = sampler.sample()[0]
    assert s.power_watts is None and s.dram_bandwidth_utilization_ratio is None
    assert s.utilization_ratio == pytest.approx(0.92)


def test_no_driver_logs_one_line_and_samples_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lanewatch.collector.collect.gpu")
    sampler = GpuSampler(FakeNvml(broken=True))
    assert not sampler.start()
    assert sampler.sample() == []
    sampler.shutdown()
    assert len(caplog.records) == 1 and "Driver Not Loaded" in caplog.records[0].getMessage()


def test_cli_without_nvml_exits_1() -> None:
    # This machine has no NVIDIA driver: the real pynvml fails at nvmlInit.
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        assert main(["--once", "--json", "--interval", "0"]) == 1
    else:  # pragma: no cover - only on a GPU machine
        pynvml.nvmlShutdown()
        assert main(["--once", "--json", "--interval", "0.1"]) == 0
