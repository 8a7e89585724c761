#!/usr/bin/env bash
# Run by Snakemake once inside envs/hsitp.yaml's new environment, from the workflow directory (the repository
# root): PyTorch's CPU build (no multi-GB CUDA download), then the versions CI tested and this package.
set -euo pipefail
if ! grep -q '^name = "hsitp"' pyproject.toml 2>/dev/null || [ ! -f constraints.txt ]; then
  echo "hsitp post-deploy: run snakemake from the hsitp repository root (no pyproject.toml/constraints.txt in $PWD)" >&2
  exit 1
fi
torch=$(grep -E '^torch==' constraints.txt)
python -m pip install --no-cache-dir "$torch" --index-url https://download.pytorch.org/whl/cpu
python -m pip install --no-cache-dir -c constraints.txt -e .
