#!/usr/bin/env bash
# Snakemake runs this in the new environment of environment.yml (--software-deployment-method
# conda), from its working directory, the repository root: the study package itself, its
# dependencies being those of environment.yml already.
set -euo pipefail
pip install --no-deps -e .
