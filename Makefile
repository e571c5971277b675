# Both targets are self-contained on a fresh machine: they create .venv when it is
# missing and (re)install the project whenever pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint install bench browser ocr

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ocr

# The main job on the embedded default: ingest the sample notes, serve them (the URL is printed), follow changes until Ctrl-C.
run: $(STAMP) ocr
	TINYMEMORY_DATA_DIR=$${TINYMEMORY_DATA_DIR:-.tinymemory} $(BIN)/tinymemory up examples/notes

# The console's browser tests drive Debian's Chromium: installed here when missing and possible (as root with
# apt-get); otherwise those tests skip and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
		  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; }; } || \
		echo "no Chromium could be installed (apt-get install chromium): the browser tests will skip"

# Scans and images are read by Tesseract: its language data comes from Debian's packages, installed here when
# missing and possible; without it the OCR tests skip and say why, and a build dead-letters scans with the reason.
ocr:
	@test -f /usr/share/tesseract-ocr/5/tessdata/eng.traineddata || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null 2>&1 || \
		  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null; }; }; } || \
		echo "no Tesseract language data could be installed (apt-get install tesseract-ocr tesseract-ocr-eng): the OCR tests will skip"

test: $(STAMP) browser ocr
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Every benchmark of bench/ end to end, and one report with charts: bench/report/REPORT.md (QUICK=1: a 2-minute subset).
bench: $(STAMP)
	@$(BIN)/python -c "import matplotlib, langchain_core, llama_index.core, rank_bm25, Stemmer" 2>/dev/null \
		|| $(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench.report $(if $(QUICK),--quick)
