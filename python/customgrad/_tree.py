"""Nested structures: flatten, rebuild, and match a returned structure against an expected one.

Containers are tuples (namedtuples too), lists and dicts (keys in sorted order, as in
`keras.tree`); everything else is a leaf, `None` included.
"""

from __future__ import annotations

from typing import Any, Callable


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


def map_leaves(fn: Callable, x: Any) -> Any:
    """Applies `fn` to every leaf of `x`, keeping the structure."""
    return unflatten(x, [fn(leaf) for leaf in flatten(x)])


class StructureMismatch(ValueError):
    """Raised by `match` with the path of the first place where the two structures differ."""

    def __init__(self, path: str, expected: str, received: str):
        self.path, self.expected, self.received = path, expected, received
        super().__init__(f"at {path or 'the top level'}: expected {expected}, received {received}")


def describe(x: Any) -> str:
    """A short description of a value for error messages: its type, and shape if it has one."""
    if x is None:
        return "None"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(x)!r}"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of length {len(x)}"
    shape = getattr(x, "shape", None)
    if shape is not None:
        dtype = getattr(x, "dtype", None)
        dtype = getattr(dtype, "name", dtype)
        kind = getattr(x, "describe_as", type(x).__name__)
        return f"a {kind} of shape {tuple(shape)} and dtype {dtype}"
    return f"a {type(x).__name__}"


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
