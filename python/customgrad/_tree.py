"""Nested structures: flatten, rebuild, and match a returned structure against an expected one.

Containers are tuples (namedtuples too), lists and dicts (keys in sorted order, as in
`keras.tree`); everything else is a leaf, `None` included.
"""

from __future__ import annotations

from typing import Any


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _children(x: Any) -> list | None:
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, dict):
        return [x[k] for k in sorted(x)]
    return None


def is_leaf(x: Any) -> bool:
    """Whether `x` is a leaf (not a list, tuple or dict).

    >>> is_leaf(1.0), is_leaf([1.0])
    (True, False)
    """
    return not isinstance(x, (list, tuple, dict))


def all_leaves(xs) -> bool:
    """Whether no element of `xs` is a container.

    >>> all_leaves((1.0, None)), all_leaves((1.0, [2.0]))
    (True, False)
    """
    for x in xs:
        if isinstance(x, (list, tuple, dict)):
            return False
    return True


def flatten(x: Any) -> list:
    """Returns the leaves of `x`, depth first.

    >>> flatten({"b": [1, 2], "a": (3, None)})
    [3, None, 1, 2]
    """
    children = _children(x)
    if children is None:
        return [x]
    leaves = []
    for child in children:
        leaves.extend(flatten(child))
    return leaves


def unflatten(structure: Any, leaves: list) -> Any:
    """Rebuilds `structure` with its leaves replaced, in order, by `leaves`.

    >>> unflatten({"a": 0, "b": [0, 0]}, [1, 2, 3])
    {'a': 1, 'b': [2, 3]}
    """
    if len(leaves) == 1 and not isinstance(structure, (list, tuple, dict)):
        return leaves[0]  # the common single-tensor case
    it = iter(leaves)
    result = _rebuild(structure, it)
    rest = list(it)
    if rest:
        raise ValueError(f"unflatten: {len(rest)} leaves left over")
    return result


def _rebuild(structure: Any, it) -> Any:
    if isinstance(structure, dict):
        values = {k: _rebuild(structure[k], it) for k in sorted(structure)}
        return type(structure)((k, values[k]) for k in structure)
    if isinstance(structure, (list, tuple)):
        items = [_rebuild(child, it) for child in structure]
        if _is_namedtuple(structure):
            return type(structure)(*items)
        return type(structure)(items)
    return next(it)


class StructureMismatch(ValueError):
    """Raised by `match` with the path of the first place where the two structures differ."""

    def __init__(self, path: str, expected: str, received: str):
        self.path, self.expected, self.received = path, expected, received
        super().__init__(f"at {path or 'the top level'}: expected {expected}, received {received}")


FRAMEWORKS = {"jax": "jax", "jaxlib": "jax", "tensorflow": "tensorflow", "tf_keras": "tensorflow",
               "torch": "torch", "numpy": "numpy", "keras": "keras"}


def framework_of(x: Any) -> str | None:
    """The framework a value's type comes from ("jax", "tensorflow", "torch", "numpy", "keras"),
    read off the type's module; None for Python's own types and anything else.

    >>> import numpy as np
    >>> framework_of(np.float32(1.0)), framework_of(1.0)
    ('numpy', None)
    """
    module = type(x).__module__
    return FRAMEWORKS.get(module.partition(".")[0]) if module else None


_TF_COMPOSITES = ("RaggedTensor", "SparseTensor", "IndexedSlices")


def _with_article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _shape_text(shape) -> str:
    try:
        return str(tuple(shape))
    except (TypeError, ValueError):  # a TensorShape of unknown rank cannot be iterated
        return "(unknown)"


def describe(x: Any) -> str:
    """A short description of a value for error messages: what it is, and its shape and dtype if
    it has them.

    >>> import numpy as np
    >>> describe(3), describe(np.zeros((2,), "float32")), describe((1, 2))
    ('an int', 'a numpy array of shape (2,) and dtype float32', 'a tuple of length 2')
    """
    if x is None:
        return "None"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(x)!r}"
    if isinstance(x, (list, tuple)):
        return f"{_with_article(type(x).__name__)} of length {len(x)}"
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    dtype = str(getattr(dtype, "name", dtype)).rpartition(".")[2]  # "torch.float32" -> "float32"
    framework = framework_of(x)
    if framework == "numpy" and shape == ():
        return f"a numpy {dtype} scalar"
    if shape is not None:
        kind = getattr(x, "describe_as", None)
        if kind is None and framework and type(x).__name__.endswith("Variable"):
            kind = f"{framework} variable"
        if kind is None and framework == "tensorflow" and type(x).__name__ in _TF_COMPOSITES:
            kind = f"tf.{type(x).__name__}"
        if kind is None:
            kind = {"numpy": "numpy array", "jax": "jax array", "tensorflow": "tensorflow tensor",
                    "torch": "torch tensor", "keras": "keras tensor"}.get(framework, type(x).__name__)
        return f"{_with_article(kind)} of shape {_shape_text(shape)} and dtype {dtype}"
    return _with_article(type(x).__name__)


def match(value: Any, structure: Any, path: str = "") -> list:
    """Returns the leaves of `value` aligned with the leaves of `structure`.

    `None` stands for a whole subtree (every leaf under it becomes None).

    >>> match([1, None], [0, {"a": 0, "b": 0}])
    [1, None, None]
    """
    if value is None:
        return [None] * len(flatten(structure))
    children = _children(structure)
    if children is None:
        if _children(value) is not None:
            raise StructureMismatch(path, "a single tensor", describe(value))
        return [value]
    if isinstance(structure, dict):
        if not isinstance(value, dict) or sorted(value) != sorted(structure):
            raise StructureMismatch(path, describe(structure), describe(value))
        leaves = []
        for key in sorted(structure):
            leaves.extend(match(value[key], structure[key], f"{path}[{key!r}]"))
        return leaves
    if not isinstance(value, (list, tuple)) or len(value) != len(structure):
        raise StructureMismatch(path, describe(structure), describe(value))
    leaves = []
    for i, (v, s) in enumerate(zip(value, structure)):
        leaves.extend(match(v, s, f"{path}[{i}]"))
    return leaves


def leaf_paths(structure: Any, path: str = "") -> list[str]:
    """The path of every leaf of `structure`, in `flatten` order."""
    children = _children(structure)
    if children is None:
        return [path]
    if isinstance(structure, dict):
        keys = [f"[{k!r}]" for k in sorted(structure)]
    else:
        keys = [f"[{i}]" for i in range(len(structure))]
    paths = []
    for key, child in zip(keys, children):
        paths.extend(leaf_paths(child, path + key))
    return paths
