# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs compose-demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,eval]"
	touch $(STAMP)

## make demo: a 3-hospital federation on loopback with mTLS over the bundled Adult data
demo: $(STAMP)
	$(BIN)/python tools/demo.py --out out/demo

## make test: ruff, mypy, the import layers (import-linter), the docs build (mkdocs --strict)
## and the test suite (docker end-to-end tests run from .ci/run)
test: $(STAMP) lint docs
	$(BIN)/pytest -m "not docker"

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/python tools/typecheck.py
	$(BIN)/python tools/lint_imports.py

## make docs: the reference in docs/ as a site (build/site); a broken link or anchor fails
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

## make compose-demo: the same federation as Docker containers (see deploy/)
compose-demo: $(STAMP)
	bash deploy/compose-demo.sh

## make bench: speed and memory of anonymize (Adult, 1M rows; --scale: the 10M-row, Parquet,
## identifier, Adult x4 and PostgreSQL runs of issue 10), federate (the
## issue-9 workloads and targets), rings of n = 3, 5, 10, 20 hospitals (docs/results/ring.*),
## and a federation over delayed links (bench/bench_wan.py: n = 3 and 5 at 0, 10, 40, 100 ms RTT;
## the 26-specialization Adult k-anonymity spec of issue 19 at 0 and 40 ms)
bench: $(STAMP)
	$(BIN)/python bench/bench_anonymize.py --scale
	$(BIN)/python bench/bench_federate.py
	$(BIN)/python bench/bench_ring.py
	$(BIN)/python bench/bench_wan.py
	$(BIN)/python bench/bench_wan.py --spec bench/specs/adult-kanon-l1.toml --parties 3 --rtt-ms 0 40

clean:
	rm -rf $(VENV) out build dist *.egg-info
