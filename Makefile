# Two commands do all set-up: `make main` and `make test`. Each creates the
# environment it needs when missing (scripts/ensure_env.sh) and reuses it after.

SHELL := /bin/bash
TFSEQREC_DATA ?= $(abspath ../shared/data)
export TFSEQREC_DATA
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Two test processes (pytest-xdist), each test file in one of them so that a module's
# trained-model fixtures are built once: tracing, export and the CLI's start-up are
# single-threaded Python, so two processes nearly halve the suite on two cores.
PYTEST_WORKERS ?= 2
PYTEST_FLAGS ?= -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile

.PHONY: main stats lint test test-primary test-latest test-jax tables bench-masking bench-ml1m bench-ml1m-ablation bench-time-bias bench-serving bench-scale bench-text bench-transfer env clean-env

# Where `make main` reads ML-1M: $(TFSEQREC_DATA) when it holds it, else the download
# cache that `tfseqrec data download ml-1m` fills.
TFSEQREC_CACHE ?= $(HOME)/.cache/tfseqrec/data
MAIN_DATA = $(if $(wildcard $(TFSEQREC_DATA)/ml-1m/ml-1m.txt),$(TFSEQREC_DATA),$(TFSEQREC_CACHE))

# The main job: train SASRec on ML-1M (30 minutes at most), evaluate on the test split.
# A rerun replaces the model when it completes; a killed run resumes.
main: env
	@if [ ! -f "$(MAIN_DATA)/ml-1m/ml-1m.txt" ]; then \
	  echo "No ML-1M in TFSEQREC_DATA=$(TFSEQREC_DATA): downloading it to $(TFSEQREC_CACHE)" >&2; \
	  .venv/bin/tfseqrec data download ml-1m --dir "$(TFSEQREC_CACHE)"; fi
	.venv/bin/tfseqrec train --model sasrec --data $(MAIN_DATA)/ml-1m/ml-1m.txt \
	    --output runs/sasrec-ml1m --max-train-minutes 30 --overwrite

stats: env
	.venv/bin/tfseqrec data stats $(TFSEQREC_DATA)/ml-1m/ml-1m.txt

# Formatting and lint first (seconds), then each test file on the stack it says most on, once:
# the unit and oracle tests of the code that TensorFlow's and Keras's versions change (models,
# layers, data, losses, ranking, export) and the JAX backend on the latest stack; the TFX
# components and the end-to-end runs (command line, training driver, serving, pipeline) on the
# primary stack, whose TensorFlow they exercise through the same models.
LATEST_TESTS = tests/backends tests/models tests/layers tests/data tests/test_export.py \
	tests/test_losses.py tests/test_metrics.py tests/test_optimizers.py tests/test_keras_internals.py
test: lint test-primary test-latest

# ruff in its own small environment, pinned in requirements/lint.txt.
lint:
	@if [ ! -x .venv-lint/bin/ruff ] || ! cmp -s requirements/lint.txt .venv-lint/.stamp; then \
	  rm -rf .venv-lint && python3 -m venv .venv-lint && \
	  .venv-lint/bin/python -m pip install --quiet --disable-pip-version-check -r requirements/lint.txt \
	    2> >(grep -v "^WARNING: Location 'file://" >&2) && \
	  cp requirements/lint.txt .venv-lint/.stamp; fi
	.venv-lint/bin/ruff format --check .
	.venv-lint/bin/ruff check .

test-primary: env
	.venv/bin/python -m pytest $(PYTEST_FLAGS) tests $(addprefix --ignore=,$(LATEST_TESTS))

test-latest:
	scripts/ensure_env.sh latest
	.venv-latest/bin/python -m pytest $(PYTEST_FLAGS) -m "not tfx and not primary" $(LATEST_TESTS)

# The core and the NumPy-oracle tests on the JAX backend, alone (tests/backends; test-latest
# runs them too): each in a process of its own with KERAS_BACKEND=jax.
test-jax:
	scripts/ensure_env.sh latest
	.venv-latest/bin/python -m pytest $(PYTEST_FLAGS) tests/backends

# The benchmark tables from the stored records (benchmarks/results/); no training.
tables:
	python3 benchmarks/render.py

bench-masking: env
	.venv/bin/python benchmarks/masking.py

# Time budgets of the ML-1M targets: SASRec 30 minutes, BERT4Rec and HSTU 60; three seeds each.
bench-ml1m: env
	mkdir -p runs
	.venv/bin/python benchmarks/ml1m.py --model sasrec --minutes 30 --seeds 0 1 2 --json runs/bench-ml1m-sasrec.json
	.venv/bin/python benchmarks/ml1m.py --model bert4rec --minutes 60 --seeds 0 1 2 --json runs/bench-ml1m-bert4rec.json
	.venv/bin/python benchmarks/ml1m.py --model hstu --minutes 60 --seeds 0 1 2 --json runs/bench-ml1m-hstu.json

bench-ml1m-ablation: env
	mkdir -p runs
	.venv/bin/python benchmarks/ml1m.py --model sasrec --minutes 10 --ablation all --json runs/ablation-sasrec.json
	.venv/bin/python benchmarks/ml1m.py --model bert4rec --minutes 10 --ablation all --json runs/ablation-bert4rec.json
	.venv/bin/python benchmarks/ml1m.py --model hstu --minutes 10 --ablation all --json runs/ablation-hstu.json

# HSTU with and without its relative time bias on data with event times (ML-100K).
bench-time-bias: env
	mkdir -p runs
	.venv/bin/python benchmarks/time_bias.py --epochs 60 --seeds 0 1 --json runs/bench-time-bias.json

bench-serving: env
	.venv/bin/python benchmarks/serving.py

# Synthetic logs of 1e5, 1e6 and 1e7 events over 1e4, 1e5 and 1e6 items.
bench-scale: env
	mkdir -p runs
	.venv/bin/python benchmarks/scale.py --json runs/bench-scale.json

# Amazon Scientific: popularity, SASRec, UniSRec (text, text + id, trained on ML-1M), Recformer.
bench-text: env
	mkdir -p runs
	.venv/bin/python benchmarks/text.py --minutes 20 --recformer-minutes 80 \
	    --recformer-config '{"epochs": 6, "stage2_epochs": 2, "learning_rate": 1e-4, "examples_per_user": 2}' \
	    --json runs/bench-text.json

# UniSRec text only trained on ML-1M, and Recformer zero-shot, on ML-100K and Amazon Scientific.
bench-transfer: env
	mkdir -p runs
	.venv/bin/python benchmarks/transfer.py --epochs 20 --minutes 60 --json runs/bench-transfer.json

env:
	scripts/ensure_env.sh primary

clean-env:
	rm -rf .venv .venv-latest
