# The two commands of the README: `make demo` and `make test`. Both set up first (idempotent).
# `make docs` builds the Python site (site/python) and the R site (site/r) offline.
PY := .venv/bin/python

.PHONY: setup demo test bench docs matrix fuzz tfp
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

# the differential test's long run: thousands of random custom-gradient programs per backend
# against a numpy float64 truth (tests/differential/); `make fuzz FUZZ_SEED=7 FUZZ_COUNT=500`;
# then the route x transform grid on every backend, with its table (tests/differential/routes.py)
FUZZ_SEED ?= 0
FUZZ_COUNT ?= 3000
fuzz: setup
	@$(PY) tests/differential/driver.py --seed $(FUZZ_SEED) --count $(FUZZ_COUNT)
	@$(PY) tests/differential/routes.py --all --table

# TensorFlow Probability's own tests, natively and with customgrad in place of tf.custom_gradient
# (tests/clients/tfp_suite.py), counted per module: `make tfp TFP_SOURCE=<TFP's source checkout>`,
# TFP_ARGS="--sample 5" for every 5th test (about 35 min on 2 cores; all of them take hours)
TFP_SOURCE ?=
TFP_ARGS ?=
tfp: setup
	@test -n "$(TFP_SOURCE)" || { echo "make tfp: set TFP_SOURCE to a checkout of TensorFlow Probability's source" >&2; exit 2; }
	@$(PY) -m pip install -q --disable-pip-version-check -r tests/clients/requirements.txt
	@$(PY) tests/clients/tfp_suite.py --tfp-source "$(TFP_SOURCE)" $(TFP_ARGS)
