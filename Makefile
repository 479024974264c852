# The two commands of the README: `make demo` and `make test`. Both set up first (idempotent).
# `make docs` builds the Python site (site/python) and the R site (site/r) offline.
PY := .venv/bin/python

.PHONY: setup demo check test test-python test-r test-integration bench docs matrix fuzz tfp
.PHONY: clients
setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) vignettes/log1pexp_demo.py

# The test tiers (scripts/run_tests.py): jobs side by side, each Keras backend in its own process
# (Keras fixes its backend per process); each run ends with the 15 slowest tests and each tier's time.
# `make check` before a commit: lint, types, one backend's tests/python without the slow tests
# (BACKEND=torch make check for another backend). `make test` is what CI runs: every tier.
BACKEND ?= jax
check: setup
	@BACKEND=$(BACKEND) $(PY) scripts/run_tests.py check

test-python: setup
	@$(PY) scripts/run_tests.py python

test-r: setup
	@$(PY) scripts/run_tests.py r

test-integration: setup
	@$(PY) scripts/run_tests.py integration

test: setup
	@$(PY) scripts/run_tests.py all

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

# Four clients' own tests (larq, tensorflow-model-optimization, tf-models-official, gpflow),
# natively and with customgrad in place of tf.custom_gradient (tests/clients/clients_suite.py):
# their sources are downloaded; CLIENTS_ARGS="--clients larq,gpflow --source tfmot=DIR" (about
# 8 min for all four on 2 cores)
CLIENTS_ARGS ?=
clients: setup
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps -r tests/clients/clients-requirements.txt
	@$(PY) tests/clients/clients_suite.py $(CLIENTS_ARGS)
