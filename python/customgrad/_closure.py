"""What a function reaches without receiving it as an argument: the objects it closes over, the
globals it names and the object a bound method belongs to (`objects_of`), and the tensors among
them (`tensors_reachable`). The backends look there for tensors being differentiated that f
reads through an object (a module's or a layer's attribute), whose gradients grad_fn would
otherwise drop.

>>> scale = 2.0
>>> def f(x):
...     return x * scale
>>> [name for name, _ in objects_of(f)]
['scale']
"""

from __future__ import annotations

import site
import sys
import sysconfig
from types import ModuleType


def closure_cells(fn) -> list:
    """(index, name, value) for each assigned cell of fn's closure (a bound method's function's),
    in the closure's order; an empty cell (a name not assigned yet) is left out.

    >>> def outer():
    ...     y = 2.0
    ...     return lambda x: x * y
    >>> closure_cells(outer())
    [(0, 'y', 2.0)]
    """
    cells = getattr(fn, "__closure__", None)
    if not cells:
        return []
    found = []
    for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars, cells)):
        try:
            found.append((i, name, cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    return found


def objects_of(*fns) -> list:
    """(name, object) for what the functions close over, the globals they name, and the object
    a bound method belongs to (`self`)."""
    objects = []
    for fn in fns:
        owner = getattr(fn, "__self__", None)
        if owner is not None:
            objects.append(("self", owner))
        code = getattr(fn, "__code__", None)
        if code is None:
            continue
        objects.extend((name, value) for _, name, value in closure_cells(fn))
        scope = getattr(fn, "__globals__", {})
        objects.extend((name, scope[name]) for name in code.co_names if name in scope)
    return objects


def tensors_reachable(fns, is_tensor, more=None) -> list:
    """(name, tensor) for the tensors the functions reach through what they close over, the
    globals they name or their `self`: one of those, an element of one that is a list, tuple or
    dict, or an attribute of one; `more(name, obj)`: further (name, tensor) pairs a backend
    finds in an object (a torch module's parameters).

    >>> import numpy as np
    >>> weights = [np.ones(2)]
    >>> def f(x):
    ...     return x * weights[0]
    >>> [name for name, _ in tensors_reachable([f], lambda x: isinstance(x, np.ndarray))]
    ['weights[0]']
    """
    found = []
    named = None  # the names in the functions' code: globals and attributes (`mod.weights`)
    for name, obj in objects_of(*fns):
        if is_tensor(obj):
            found.append((name, obj))
            continue
        if isinstance(obj, (list, tuple, dict)):
            pairs = obj.items() if isinstance(obj, dict) else enumerate(obj)
            found.extend((f"{name}[{key!r}]", value) for key, value in pairs if is_tensor(value))
        else:
            attributes = getattr(obj, "__dict__", None) or {}
            if isinstance(obj, ModuleType) and _of_a_library(obj):
                # of a library's module, the attributes the code names (`ops.exp`): keras.ops
                # has hundreds, and this runs on every call
                if named is None:
                    named = {n for fn in fns for n in getattr(getattr(fn, "__code__", None),
                                                              "co_names", ())}
                attributes = {key: attributes[key] for key in named if key in attributes}
            found.extend((f"{name}.{key}", value) for key, value in attributes.items()
                         if is_tensor(value))
        if more is not None:
            found.extend(more(name, obj))
    return found


# where installed libraries live: the standard library and the site-packages directories
_LIBRARY_DIRS = tuple(sorted(
    {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    | set(site.getsitepackages()) | {site.getusersitepackages()}))
_BUILTIN_MODULES = frozenset(sys.builtin_module_names)
_library_files: dict = {}  # a module's file: whether it is a library's


def _of_a_library(module: ModuleType) -> bool:
    """Whether a module is an installed library's (its file is in the standard library or a
    site-packages directory), not the user's. Of a user's module every attribute is searched,
    so that a tensor it holds is found when f reaches it through one of the module's functions
    (`state.h()` returning `state.weights`)."""
    file = getattr(module, "__file__", None)
    if file is None:  # built in, or made at run time (`types.ModuleType`)
        return module.__name__ in _BUILTIN_MODULES
    known = _library_files.get(file)
    if known is None:
        known = _library_files[file] = file.startswith(_LIBRARY_DIRS)
    return known
