# The two commands of the README: `make demo` and `make test`. Both set up first (idempotent).
# `make docs` builds the Python site (site/python) and the R site (site/r) offline.
PY := .venv/bin/python

.PHONY: setup demo test bench docs matrix
setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) vignettes/log1pexp_demo.py

# Each Keras backend runs in its own process (Keras fixes its backend per process).
test: setup
	@bash scripts/run_tests.sh

# every cell of the version matrix: the floor and newest version of each framework, one backend
# per venv (cached under ~/.cache/customgrad/matrix)
matrix: setup
	@$(PY) scripts/matrix.py

bench: setup
	@$(PY) bench/run.py

docs: setup
	@bash scripts/build_docs.sh
