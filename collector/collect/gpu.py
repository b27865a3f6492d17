"""GPU telemetry from NVML (the `pynvml` module of nvidia-ml-py), the module injected.

`GpuSampler(nvml)` reads, per device: utilization, memory used/total, power, SM and
memory clocks, temperature, the peak HBM bandwidth (bus width / 8 × max memory clock
× 2, data moving on both clock edges), and on GPM-capable GPUs (Hopper and newer)
DRAM bandwidth utilization between consecutive samples. Without NVML it logs one
line and yields nothing; a field a GPU does not support is None, never an error.

`python -m lanewatch.collector.collect.gpu --once --json` prints one sample of every GPU.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lanewatch.collector.record.evidence import GpuSample

log = logging.getLogger(__name__)
R = TypeVar("R")
MHZ = 1_000_000


def peak_hbm_bandwidth(bus_width_bits: int, max_memory_clock_mhz: float) -> float:
    """Theoretical memory bandwidth in bytes/s: bus bytes × clock × 2 (double data rate)."""
    return bus_width_bits / 8 * max_memory_clock_mhz * MHZ * 2


@dataclass(slots=True)
class _Device:
    index: int
    handle: Any
    uuid: str
    name: str
    memory_total: float | None
    peak_bandwidth: float | None
    gpm: list[Any] | None  # [previous, current] GPM samples, None without GPM support
    gpm_primed: bool = False


class GpuSampler:
    """Samples every GPU through an NVML module (pynvml or a fake with the same functions)."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._devices: list[_Device] = []
        self._started = False

    def start(self) -> bool:
        """Initialise NVML and find the GPUs; False (after one log line) when NVML is unavailable."""
        try:
            self._nvml.nvmlInit()
            count = self._nvml.nvmlDeviceGetCount()
        except Exception as exc:  # NVMLError, a missing library (OSError) or a broken install
            log.info("NVML unavailable (%s): no GPU metrics", exc)
            return False
        self._started = True
        self._devices = [self._open(i) for i in range(count)]
        return True

    def _open(self, index: int) -> _Device:
        nvml = self._nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        memory = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        bus = self._try(lambda: nvml.nvmlDeviceGetMemoryBusWidth(handle))
        max_mem = self._try(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
        return _Device(
            index=index,
            handle=handle,
            uuid=_text(self._try(lambda: nvml.nvmlDeviceGetUUID(handle)) or ""),
            name=_text(self._try(lambda: nvml.nvmlDeviceGetName(handle)) or ""),
            memory_total=float(memory.total) if memory is not None else None,
            peak_bandwidth=peak_hbm_bandwidth(bus, max_mem) if bus and max_mem else None,
            gpm=self._gpm_samples(handle),
        )

    def _gpm_samples(self, handle: Any) -> list[Any] | None:
        nvml = self._nvml
        if not hasattr(nvml, "nvmlGpmQueryDeviceSupport"):
            return None
        support = self._try(lambda: nvml.nvmlGpmQueryDeviceSupport(handle))
        if support is None or not support.isSupportedDevice:
            return None
        return self._try(lambda: [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()])

    def sample(self) -> list[GpuSample]:
        """One sample per GPU; empty when NVML did not start."""
        return [self._sample(d) for d in self._devices] if self._started else []

    def _sample(self, d: _Device) -> GpuSample:
        nvml, h = self._nvml, d.handle
        util = self._try(lambda: nvml.nvmlDeviceGetUtilizationRates(h))
        memory = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(h))
        power_mw = self._try(lambda: nvml.nvmlDeviceGetPowerUsage(h))
        temp = self._try(lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
        sm = self._try(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
        mem_clock = self._try(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM))
        return GpuSample(
            index=d.index,
            uuid=d.uuid,
            name=d.name,
            utilization_ratio=util.gpu / 100 if util is not None else None,
            memory_used_bytes=float(memory.used) if memory is not None else None,
            memory_total_bytes=d.memory_total,
            power_watts=power_mw / 1000 if power_mw is not None else None,
            temperature_celsius=float(temp) if temp is not None else None,
            sm_clock_hertz=sm * MHZ if sm is not None else None,
            memory_clock_hertz=mem_clock * MHZ if mem_clock is not None else None,
            hbm_bandwidth_peak_bytes_per_second=d.peak_bandwidth,
            dram_bandwidth_utilization_ratio=self._dram_utilization(d),
        )

    def _dram_utilization(self, d: _Device) -> float | None:
        """DRAM bandwidth use between the previous sample and this one (GPM needs two)."""
        if d.gpm is None:
            return None
        nvml = self._nvml
        prev, cur = d.gpm
        if self._try(lambda: nvml.nvmlGpmSampleGet(d.handle, cur)) is None:
            return None
        primed, d.gpm_primed = d.gpm_primed, True
        d.gpm = [cur, prev]  # this sample is the next one's start
        if not primed:
            return None
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 1
        request.sample1, request.sample2 = prev, cur
        request.metrics[0].metricId = nvml.NVML_GPM_METRIC_DRAM_BW_UTIL
        result = self._try(lambda: nvml.nvmlGpmMetricsGet(request))
        if result is None or result.metrics[0].nvmlReturn != nvml.NVML_SUCCESS:
            return None
        return float(result.metrics[0].value) / 100

    def shutdown(self) -> None:
        """Free GPM samples and shut NVML down."""
        if not self._started:
            return
        for d in self._devices:
            for s in d.gpm or ():
                self._try(functools.partial(self._nvml.nvmlGpmSampleFree, s))
        self._try(self._nvml.nvmlShutdown)
        self._started = False
        self._devices = []

    def _try(self, call: Callable[[], R]) -> R | None:
        try:
            return call()
        except self._nvml.NVMLError:
            return None


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def load_nvml() -> Any | None:
    """The pynvml module of nvidia-ml-py; None (after one log line) when it cannot be imported."""
    try:
        import pynvml
    except ImportError as exc:
        log.info("pynvml not importable (%s): no GPU metrics", exc)
        return None
    return pynvml


def main(argv: Sequence[str] | None = None) -> int:
    """Print GPU samples: `--once` takes two samples `--interval` apart and prints the second."""
    parser = argparse.ArgumentParser(
        prog="python -m lanewatch.collector.collect.gpu", description=main.__doc__
    )
    parser.add_argument("--once", action="store_true", help="print one sample and exit")
    parser.add_argument("--json", action="store_true", help="one JSON array of samples")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    nvml = load_nvml()
    sampler = GpuSampler(nvml) if nvml is not None else None
    if sampler is None or not sampler.start():
        return 1
    try:
        sampler.sample()  # GPM rates need a start sample
        while True:
            time.sleep(args.interval)
            samples = sampler.sample()
            if args.json:
                print(json.dumps([s.to_json() for s in samples]), flush=True)
            else:
                for s in samples:
                    print(" ".join(f"{k}={v}" for k, v in s.to_json().items()), flush=True)
            if args.once:
                return 0
    finally:
        sampler.shutdown()


if __name__ == "__main__":
    sys.exit(main())
