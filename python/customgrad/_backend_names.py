"""The one list of the Keras backends customgrad supports, in a leaf module that imports nothing,
so that the core, the tests, the test scripts, the benchmarks and the walkthrough can read it (the
scripts through runpy, without importing Keras).

>>> NAMES
('jax', 'tensorflow', 'torch', 'numpy')
"""

NAMES = ("jax", "tensorflow", "torch", "numpy")
AUTODIFF = ("jax", "tensorflow", "torch")  # the backends with gradients (numpy: forward only)
