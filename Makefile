# Both targets are self-contained on a fresh machine: they create .venv when it is
# missing and (re)install the project whenever pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint install

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# The main job on the embedded default: ingest the sample notes, serve them (the URL is printed), follow changes until Ctrl-C.
run: $(STAMP)
	TINYMEMORY_DATA_DIR=$${TINYMEMORY_DATA_DIR:-.tinymemory} $(BIN)/tinymemory up examples/notes

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
