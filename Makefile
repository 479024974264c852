# The two commands of the README: `make demo` and `make test`. Both set up first (idempotent).
PY := .venv/bin/python

.PHONY: setup demo test bench
setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) vignettes/log1pexp_demo.py

# Each Keras backend runs in its own process (Keras fixes its backend per process).
test: setup
	@bash scripts/run_tests.sh

bench: setup
	@$(PY) bench/run.py
