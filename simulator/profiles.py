"""Timing profiles from a roofline: a fast lane (~1B model, one GPU) and a slow lane (~70B, two GPUs).

A decode step reads every weight once, so it takes at least weight bytes / HBM bandwidth; a
prefill token costs 2 x parameters FLOPs, so a prefill chunk takes at least tokens x 2 x params /
peak FLOP/s; a decoding request also reads its KV cache (context x KV bytes per token / HBM
bandwidth). Real kernels reach a fraction of peak, hence the efficiency factors, and every step
pays a fixed CPU and launch overhead. engine.py's `StepCost` turns these into seconds.

Numbers and sources:
- GPU: NVIDIA H100 SXM5 80 GB (NVIDIA H100 Tensor Core GPU datasheet): 3.35 TB/s HBM3,
  989 TFLOP/s dense BF16 (1,979 with sparsity, not used here), 80 GiB memory.
- Llama 3.2 1B Instruct (its Hugging Face config.json and model card): 1.24 B parameters,
  16 layers, 8 KV heads of dimension 64 -> KV cache 16 x 8 x 64 x 2 (K and V) x 2 bytes =
  32 KiB per token; BF16 weights 2.47 GB.
- Llama 3.1 70B Instruct (same sources): 70.6 B parameters, 80 layers, 8 KV heads of dimension
  128 -> 320 KiB per token; BF16 weights 141 GB, so two H100s with tensor parallelism 2, which
  doubles both bandwidth and FLOP/s.
- Efficiency (assumptions, typical of vLLM on H100): decode reaches 80% of HBM bandwidth; prefill
  reaches 40% of peak FLOP/s on the 1B model (small matrices) and 45% on the 70B with TP=2
  (all-reduce included). Step overhead (scheduler, input preparation, sampling, detokenizing):
  1.5 ms on one GPU, 3 ms with TP=2 (two all-reduces per layer); plus 8 us per scheduled request.
- The API front end (HTTP, chat template, tokenizing, hand-off to the engine core) costs 4 ms plus
  1 us per prompt token before the request reaches the engine's queue.
- KV cache: vLLM's default gpu_memory_utilization 0.9 of each GPU's memory, less the weights and
  2 GiB per GPU for activations and CUDA graphs, in blocks of 16 tokens.

What results (engine.py, batch of one, short prompt): fast decode step ~2.4 ms, slow ~29.6 ms;
a 2,000-token prompt prefills in ~13 ms (fast) and ~0.32 s (slow). docs/simulator.md lists
figures measured through the server.
"""

from __future__ import annotations

from dataclasses import dataclass

from .engine import EngineConfig, StepCost

GIB = 2**30


@dataclass(frozen=True)
class Gpu:
    """One accelerator's peak figures."""

    name: str
    hbm_bytes_per_s: float
    bf16_flops: float
    memory_bytes: float


@dataclass(frozen=True)
class Model:
    """The model's size and KV-cache shape."""

    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_param: int = 2  # BF16

    @property
    def weight_bytes(self) -> float:
        """Bytes of weights read per forward pass."""
        return self.params * self.bytes_per_param

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes per token (K and V, every layer, BF16)."""
        return self.layers * self.kv_heads * self.head_dim * 2 * 2


H100_SXM = Gpu("NVIDIA H100 SXM5 80GB", hbm_bytes_per_s=3.35e12, bf16_flops=989e12, memory_bytes=80 * GIB)
LLAMA_3_2_1B = Model("meta-llama/Llama-3.2-1B-Instruct", params=1.24e9, layers=16, kv_heads=8, head_dim=64)
LLAMA_3_1_70B = Model("meta-llama/Llama-3.1-70B-Instruct", params=70.6e9, layers=80, kv_heads=8, head_dim=128)


@dataclass(frozen=True)
class Profile:
    """A served model on its GPUs, with vLLM's scheduler settings."""

    name: str
    model: Model
    gpu: Gpu
    num_gpus: int
    bw_efficiency: float
    flops_efficiency: float
    step_overhead_s: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    per_seq_overhead_s: float = 8e-6
    frontend_s: float = 4e-3
    frontend_per_token_s: float = 1e-6
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    reserved_bytes_per_gpu: float = 2 * GIB

    @property
    def cost(self) -> StepCost:
        """Step time model from the roofline."""
        bw = self.gpu.hbm_bytes_per_s * self.num_gpus * self.bw_efficiency
        flops = self.gpu.bf16_flops * self.num_gpus * self.flops_efficiency
        return StepCost(
            overhead_s=self.step_overhead_s,
            per_seq_overhead_s=self.per_seq_overhead_s,
            weights_s=self.model.weight_bytes / bw,
            token_s=2 * self.model.params / flops,
            kv_token_s=self.model.kv_bytes_per_token / bw,
        )

    @property
    def num_kv_blocks(self) -> int:
        """KV-cache blocks left after the weights and reserves."""
        free = self.num_gpus * (
            self.gpu.memory_bytes * self.gpu_memory_utilization - self.reserved_bytes_per_gpu
        )
        kv_bytes = free - self.model.weight_bytes
        return int(kv_bytes // (self.model.kv_bytes_per_token * self.block_size))

    def frontend_delay_s(self, prompt_tokens: int) -> float:
        """Time the API front end takes before the request reaches the engine's queue."""
        return self.frontend_s + prompt_tokens * self.frontend_per_token_s

    def engine_config(self, max_num_seqs: int | None = None) -> EngineConfig:
        """The engine's limits and step cost for this profile."""
        return EngineConfig(
            max_num_seqs=max_num_seqs or self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            num_kv_blocks=self.num_kv_blocks,
            block_size=self.block_size,
            max_model_len=self.max_model_len,
            cost=self.cost,
        )


FAST = Profile(
    name="fast",
    model=LLAMA_3_2_1B,
    gpu=H100_SXM,
    num_gpus=1,
    bw_efficiency=0.8,
    flops_efficiency=0.4,
    step_overhead_s=1.5e-3,
    max_num_seqs=128,
    max_num_batched_tokens=8192,
    max_model_len=32768,
)

SLOW = Profile(
    name="slow",
    model=LLAMA_3_1_70B,
    gpu=H100_SXM,
    num_gpus=2,
    bw_efficiency=0.8,
    flops_efficiency=0.45,
    step_overhead_s=3e-3,
    max_num_seqs=64,
    max_num_batched_tokens=2048,
    max_model_len=16384,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (FAST, SLOW)}
