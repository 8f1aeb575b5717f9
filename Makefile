# keras-gmlp: set-up, quick-start and tests on a fresh machine.
#   make quickstart   set up, then train gMLP on scikit-learn's digits (offline)
#   make test         set up, then lint and run the tests on all three backends
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BACKENDS ?= tensorflow jax torch
QUICKSTART_BACKEND ?= jax

.PHONY: setup quickstart test lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[all]"
	touch $@

quickstart: setup
	KERAS_BACKEND=$(QUICKSTART_BACKEND) $(BIN)/python \
		recipes/image_classification.py --dataset digits \
		--output-dir runs/digits-quickstart

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	@for backend in $(BACKENDS); do \
		echo "=== KERAS_BACKEND=$$backend"; \
		KERAS_BACKEND=$$backend $(BIN)/python -m pytest -q -m "not large" \
			-p no:cacheprovider || exit 1; \
	done
