"""Nested structures: flatten, rebuild, and match a returned structure against an expected one.

Containers are tuples (namedtuples too), lists, dicts (keys in sorted order; an OrderedDict's in
its own order) and deques, as in `keras.tree`; everything else is a leaf, `None` included. The
walks are optree's, in a namespace of customgrad's own.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import optree

CONTAINERS = (list, tuple, dict, collections.deque)  # what optree flattens
_NAMESPACE = "customgrad"
_registered: set[type] = set()
_registering = threading.Lock()


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def is_leaf(x: Any) -> bool:
    """Whether `x` is a leaf (not a list, tuple, dict or deque).

    >>> is_leaf(1.0), is_leaf([1.0])
    (True, False)
    """
    return not isinstance(x, CONTAINERS)


def all_leaves(xs) -> bool:
    """Whether no element of `xs` is a container.

    >>> all_leaves((1.0, None)), all_leaves((1.0, [2.0]))
    (True, False)
    """
    for x in xs:
        if isinstance(x, CONTAINERS):
            return False
    return True


def flatten(x: Any) -> list:
    """Returns the leaves of `x`, depth first.

    >>> flatten({"b": [1, 2], "a": (3, None)})
    [3, None, 1, 2]
    """
    if not isinstance(x, CONTAINERS):
        return [x]
    if type(x) in (tuple, list) and all_leaves(x):
        return list(x)  # the common flat case, faster without a treespec
    if _is_plain(x):
        leaves = []
        _plain_leaves(x, leaves)
        return leaves
    leaves = optree.tree_leaves(x, none_is_leaf=True, namespace=_NAMESPACE)
    return leaves if all_leaves(leaves) else _flatten(x)[0]


def unflatten(structure: Any, leaves: list) -> Any:
    """Rebuilds `structure` with its leaves replaced, in order, by `leaves`.

    >>> unflatten({"a": 0, "b": [0, 0]}, [1, 2, 3])
    {'a': 1, 'b': [2, 3]}
    """
    if len(leaves) == 1 and not isinstance(structure, CONTAINERS):
        return leaves[0]  # the common single-tensor case
    if type(structure) in (tuple, list) and len(leaves) == len(structure) \
            and all_leaves(structure):
        return type(structure)(leaves)  # the common flat case
    if _is_plain(structure):
        rebuilt, used = _plain_rebuild(structure, leaves)
        if used != len(leaves):
            raise ValueError(f"unflatten: {len(leaves)} leaves for a structure of {used}")
        return rebuilt
    return optree.tree_unflatten(_flatten(structure)[1], leaves)


# Plain structures (exact tuples, lists and dicts with string keys: what `(args, kwargs)` is)
# are walked here in plain Python, in optree's order (dict keys sorted). torch.compile cannot
# trace optree's dict handling when every leaf of the dict is a Python constant (a keyword
# argument `scale=2.0`): it breaks the graph there, and the frame it resumes then fails.

def _is_plain(x: Any) -> bool:
    kind = type(x)
    if kind is tuple or kind is list:
        return all(_is_plain(child) for child in x)
    if kind is dict:
        return all(type(key) is str and _is_plain(child) for key, child in x.items())
    return not isinstance(x, CONTAINERS)


def _plain_children(x: Any) -> tuple[list, list]:
    """(keys, children) of one level of a plain container, in optree's order."""
    if type(x) is dict:
        keys = sorted(x)
        return keys, [x[key] for key in keys]
    return list(range(len(x))), list(x)


def _plain_leaves(x: Any, leaves: list) -> None:
    if not isinstance(x, CONTAINERS):
        leaves.append(x)
        return
    for child in _plain_children(x)[1]:
        _plain_leaves(child, leaves)


def _plain_rebuild(structure: Any, leaves: list, start: int = 0) -> tuple[Any, int]:
    """(`structure` rebuilt from `leaves[start:]`, the position after the leaves it took)."""
    if not isinstance(structure, CONTAINERS):
        if start >= len(leaves):
            raise ValueError(f"unflatten: {len(leaves)} leaves for a structure of more")
        return leaves[start], start + 1
    keys, children = _plain_children(structure)
    rebuilt = []
    for child in children:
        value, start = _plain_rebuild(child, leaves, start)
        rebuilt.append(value)
    if type(structure) is dict:
        by_key = dict(zip(keys, rebuilt))
        return {key: by_key[key] for key in structure}, start  # the caller's key order
    return type(structure)(rebuilt), start


def _flatten(x: Any, with_paths: bool = False) -> tuple:
    """optree's `tree_flatten` (or `tree_flatten_with_path`) of `x`, `None` a leaf.

    optree knows list, tuple, dict, deque, namedtuples, OrderedDict and defaultdict, not other
    subclasses (keras's TrackedList, a user's own dict): a leaf that is an instance of one of
    those has its class registered here and `x` is flattened again, so that every value
    `is_leaf` calls a container is flattened as one.
    """
    flatten_fn = optree.tree_flatten_with_path if with_paths else optree.tree_flatten
    while True:
        result = flatten_fn(x, none_is_leaf=True, namespace=_NAMESPACE)
        if all_leaves(result[-2]):
            return result
        with _registering:
            for cls in {type(leaf) for leaf in result[-2] if isinstance(leaf, CONTAINERS)}:
                if cls not in _registered:
                    _register(cls)
                    _registered.add(cls)


def _register(cls: type) -> None:
    """Registers a subclass of list, tuple, dict or deque, flattened and rebuilt as its base
    class is."""
    if issubclass(cls, dict):
        def flatten_dict(d):
            keys = sorted(d)
            return [d[k] for k in keys], (keys, list(d)), keys

        def unflatten_dict(metadata, children):
            keys, order = metadata  # the leaves in sorted key order, the keys in the original's
            values = dict(zip(keys, children))
            return cls((k, values[k]) for k in order)

        optree.register_pytree_node(cls, flatten_dict, unflatten_dict, namespace=_NAMESPACE)
    elif hasattr(cls, "_fields"):
        optree.register_pytree_node(cls, lambda t: (list(t), None),
                                    lambda _, children: cls(*children), namespace=_NAMESPACE)
    else:
        optree.register_pytree_node(cls, lambda s: (list(s), None),
                                    lambda _, children: cls(children), namespace=_NAMESPACE)


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

    `None` stands for a whole subtree (every leaf under it becomes None); a list may stand for a
    tuple and the other way round.

    >>> match([1, None], (0, {"a": 0, "b": 0}))
    [1, None, None]
    """
    if type(structure) in (tuple, list) and isinstance(value, (tuple, list)) \
            and len(value) == len(structure) and all_leaves(structure) and all_leaves(value):
        return list(value)  # the common flat case
    if value is not None and isinstance(structure, CONTAINERS):
        leaves, treespec = _flatten(value)
        if treespec == _flatten(structure)[1]:
            return leaves
    return _match(value, structure, path)


def _match(value: Any, structure: Any, path: str) -> list:
    """`match` where the two treespecs differ: walks both, one level at a time."""
    if value is None:
        return [None] * len(flatten(structure))
    if is_leaf(structure):
        if isinstance(value, CONTAINERS):
            raise StructureMismatch(path, "a single tensor", describe(value))
        return [value]
    if _is_plain(structure):
        keys, children = _plain_children(structure)
    else:
        children, _, keys, _ = optree.tree_flatten_one_level(structure, none_is_leaf=True,
                                                             namespace=_NAMESPACE)
    if isinstance(structure, dict):
        if not isinstance(value, dict) or value.keys() != structure.keys():
            raise StructureMismatch(path, describe(structure), describe(value))
        values = [value[k] for k in keys]
    elif isinstance(value, (list, tuple)) and len(value) == len(structure):
        values = value  # a list may stand for a tuple, and either for a deque
    else:
        raise StructureMismatch(path, describe(structure), describe(value))
    leaves = []
    for key, v, s in zip(keys, values, children):
        leaves.extend(_match(v, s, f"{path}[{key!r}]"))
    return leaves


def leaf_paths(structure: Any, path: str = "") -> list[str]:
    """The path of every leaf of `structure`, in `flatten` order.

    >>> leaf_paths(({"b": 0, "a": [0, None]},), "args")
    ["args[0]['a'][0]", "args[0]['a'][1]", "args[0]['b']"]
    """
    if not isinstance(structure, CONTAINERS):
        return [path]
    if type(structure) in (tuple, list) and all_leaves(structure):
        return [f"{path}[{i}]" for i in range(len(structure))]  # the common flat case
    paths = _flatten(structure, with_paths=True)[0]
    return [path + "".join([f"[{key!r}]" for key in keys]) for keys in paths]
