"""Make tiny random-weight Llama models for a CPU vLLM, offline: `python make_models.py OUT_DIR`.

Each model is a transformers `LlamaConfig` with random weights (seeded) and a byte-level BPE
tokenizer trained with `tokenizers` on the Python standard library's own source, saved with
`save_pretrained` and a one-line chat template. Nothing is downloaded. Runs in the vLLM venv
(it needs torch, transformers and tokenizers), never in lanewatch's.
"""

from __future__ import annotations

import json
import pathlib
import sys
import sysconfig
from dataclasses import dataclass

VOCAB_SIZE = 4096
MAX_POSITIONS = 4096
TEXT_BYTES = 3_000_000  # training text for the tokenizer: enough for 4096 merges, seconds to train
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<|begin|>", "<|end|>", "<|pad|>"]


@dataclass(frozen=True)
class Shape:
    """One model's size."""

    name: str
    hidden: int
    layers: int
    heads: int
    intermediate: int


# tiny: the fast lane. small: ~25x the parameters, so measurably slower per token on a CPU.
SHAPES = (
    Shape("tiny", hidden=256, layers=4, heads=4, intermediate=688),
    Shape("small", hidden=1024, layers=8, heads=16, intermediate=2816),
)


def training_text() -> list[str]:
    """The standard library's .py files, sorted, up to TEXT_BYTES (the same on every machine)."""
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    out: list[str] = []
    total = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        out.append(text)
        total += len(text)
        if total >= TEXT_BYTES:
            break
    return out


def make_tokenizer(out: pathlib.Path) -> None:
    """Train a byte-level BPE tokenizer and save it as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|begin|>", eos_token="<|end|>", pad_token="<|pad|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = MAX_POSITIONS
    fast.save_pretrained(str(out))


def make_model(shape: Shape, out: pathlib.Path) -> None:
    """A seeded random Llama of the given shape, in bfloat16, beside the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(out))
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    (out / "lanewatch-model.json").write_text(json.dumps({"name": shape.name, "parameters": params}) + "\n")
    print(f"{shape.name}: {params / 1e6:.1f} M parameters in {out}")


def main(argv: list[str]) -> int:
    """Make every shape under the folder named on the command line."""
    if len(argv) != 2:
        print("usage: make_models.py OUT_DIR", file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    for shape in SHAPES:
        out = root / shape.name
        if (out / "lanewatch-model.json").exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        make_tokenizer(out)
        make_model(shape, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
