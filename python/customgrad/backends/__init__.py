"""One package (numpy: one module) per Keras backend, each meeting the contract in `_contract.py`.

The list of backends lives in the leaf module `customgrad._backend_names`; it is re-exported here.

>>> NAMES
('jax', 'tensorflow', 'torch', 'numpy')
"""

from .._backend_names import AUTODIFF, NAMES

__all__ = ["AUTODIFF", "NAMES"]
