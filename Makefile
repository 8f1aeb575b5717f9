# keras-gmlp: set-up, quick-start and tests on a fresh machine.
#   make quickstart   set up, then train gMLP on scikit-learn's digits (offline)
#   make test         set up, then lint and run the tests on all three backends
#   make test-installs  each README install line in a fresh virtualenv
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BACKENDS ?= tensorflow jax torch
QUICKSTART_BACKEND ?= jax
# pytest-xdist workers per backend (a test file stays on one worker, so its
# module fixtures are built once); 0 runs the tests in this process.
TEST_WORKERS ?= 2

.PHONY: setup quickstart test test-installs lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[all]"
	touch $@

quickstart: setup
	KERAS_BACKEND=$(QUICKSTART_BACKEND) $(BIN)/keras-gmlp \
		train-image-classifier --dataset digits --output-dir runs/digits

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	@for backend in $(BACKENDS); do \
		echo "=== KERAS_BACKEND=$$backend"; \
		KERAS_BACKEND=$$backend $(BIN)/python -m pytest -q -m "not large" \
			-n $(TEST_WORKERS) --dist loadfile --durations=10 \
			-p no:cacheprovider || exit 1; \
	done

test-installs: setup
	$(BIN)/python -m pytest -q -m large -p no:cacheprovider tests/test_installs.py
