"""What a function reaches without receiving it as an argument: the objects it closes over, the
globals it names and the object a bound method belongs to. The backends look there for tensors
being differentiated that f reads through an object (a module's or a layer's attribute), whose
gradients grad_fn would otherwise drop.

>>> scale = 2.0
>>> def f(x):
...     return x * scale
>>> [name for name, _ in objects_of(f)]
['scale']
"""

from __future__ import annotations


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
        for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            try:
                objects.append((name, cell.cell_contents))
            except ValueError:  # an empty cell
                pass
        scope = getattr(fn, "__globals__", {})
        objects.extend((name, scope[name]) for name in code.co_names if name in scope)
    return objects
