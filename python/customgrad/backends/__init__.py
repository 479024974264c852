"""One module (tensorflow: a package) per Keras backend, each meeting the contract written in
`_contract.py`.

`NAMES` is the one list of the backends customgrad supports; the core, the tests, the test
scripts, the benchmarks and the walkthrough read it from here.

>>> NAMES
('jax', 'tensorflow', 'torch', 'numpy')
"""

NAMES = ("jax", "tensorflow", "torch", "numpy")
AUTODIFF = ("jax", "tensorflow", "torch")  # the backends with gradients (numpy: forward only)
