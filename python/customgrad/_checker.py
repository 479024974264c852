"""`check_gradients`: does the gradient a function defines match its values?

The gradient under test is the one autodiff sees (customgrad.vjp, so a custom gradient is used
when `f` has one). It is compared with central finite differences of `f` computed in float64,
one tensor leaf at a time along random directions through the inner-product identity
<u, J v> = <J^T u, v>; optionally with the full Jacobian (small inputs) and with plain autodiff
of the forward (`against="autodiff"`). `order=2` checks the VJP of the VJP the same way.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from . import _messages as msg, _tree
from ._autodiff import vjp
from ._check_problem import ROUNDING, Problem, as_float64_array, dtype_name
from ._check_report import Check, GradientCheckError, GradientCheckReport

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# Per dtype of the computation under test: (atol, rtol) and the float64 finite-difference step.
_TOLERANCES = {
    "float64": (1e-7, 1e-6),
    "float32": (1e-5, 2e-3),
    "float16": (1e-3, 3e-2),
    "bfloat16": (1e-2, 6e-2),
}
_EPS = 1e-5


def check_gradients(
    f: Callable[..., Any],
    *args: Any,
    order: int = 1,
    against: str = "finite_differences",
    jacobian: bool = False,
    directions: int = 2,
    atol: float | None = None,
    rtol: float | None = None,
    eps: float | None = None,
    seed: int = 0,
    raise_on_failure: bool = True,
    modes: str | Sequence[str] = ("rev",),
    **kwargs: Any,
) -> GradientCheckReport:
    """Checks the gradient `f` defines against float64 finite differences (or plain autodiff).

    Args:
        f: the function (usually decorated with `customgrad.custom_gradient`); its positional
            float tensor leaves are checked, everything else is passed through.
        order: 1 checks first derivatives; 2 also checks the VJP of the VJP.
        against: "finite_differences" (default), or "autodiff" to compare with plain autodiff of
            the forward of a customgrad function (the custom gradient must equal the true one).
        jacobian: also compare the full Jacobian, element by element (small inputs only).
        directions: random directions per leaf for the inner-product check.
        atol: overrides the absolute tolerance (chosen by dtype).
        rtol: overrides the relative tolerance (chosen by dtype).
        eps: overrides the float64 finite-difference step.
        raise_on_failure: raise `GradientCheckError` (default) or just return the report.
        modes: which derivatives to check: "rev" (the VJP, default) and/or "fwd" (the JVP,
            which for a custom-gradient function is derived from grad_fn; on jax the function
            needs forward_mode=True), each against finite differences.

    Returns:
        A `GradientCheckReport` listing every check.

    Examples:
        >>> import keras, customgrad
        >>> @customgrad.custom_gradient
        ... def log1pexp(x):
        ...     e = keras.ops.exp(x)
        ...     return keras.ops.log1p(e), lambda dy: dy * (1 - 1 / (1 + e))
        >>> customgrad.check_gradients(log1pexp, keras.ops.convert_to_tensor([0.0, 10.0])).passed
        True
        >>> @customgrad.custom_gradient(forward_mode=True)
        ... def softplus(x):
        ...     return keras.ops.softplus(x), lambda dy: dy * keras.ops.sigmoid(x)
        >>> report = customgrad.check_gradients(softplus, keras.ops.convert_to_tensor([0.5, 2.0]),
        ...                                     modes=("rev", "fwd"))
        >>> sorted({c.name for c in report.checks})
        ['JVP vs finite differences', 'VJP vs finite differences']
    """
    modes = _checked_modes(modes)
    if order not in (1, 2):
        raise msg.check_option("order", "1 or 2", order)
    if against not in ("finite_differences", "autodiff"):
        raise msg.check_option("against", "'finite_differences' or 'autodiff'", against)
    problem = Problem(f, args, kwargs)
    default_atol, default_rtol = _TOLERANCES[problem.dtype]
    tol = (default_atol if atol is None else atol, default_rtol if rtol is None else rtol)
    eps = _EPS if eps is None else eps
    rng = np.random.default_rng(seed)
    report = GradientCheckReport(msg.fn_name(f))

    if "rev" in modes:
        if against == "autodiff":
            _check_against_autodiff(problem, rng, tol, report)
        else:
            _check_directions(problem, rng, tol, eps, directions, report,
                              "VJP vs finite differences")
            if jacobian:
                _check_jacobian(problem, tol, eps, report)
        if order == 2:
            _check_second_order(problem, rng, tol, eps, directions, report)
    if "fwd" in modes:
        _check_directions(problem, rng, tol, eps, directions, report,
                          "JVP vs finite differences", mode="fwd")

    if raise_on_failure and not report.passed:
        raise GradientCheckError(msg.check_failed(report), report)
    return report


def _random_like(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape)


def _output_cotangents(problem, rng, f=None):
    base = [as_float64_array(v) for v in problem.values]
    outs = problem.call_float64(base, f)
    return base, outs, [_random_like(rng, o.shape) for o in outs]


def _central_differences(problem, base, k, step, f=None) -> tuple[list, list]:
    """f's outputs at the float leaves `base` with leaf k moved by +step and by -step."""
    plus, minus = list(base), list(base)
    plus[k], minus[k] = base[k] + step, base[k] - step
    return problem.call_float64(plus, f), problem.call_float64(minus, f)


def _check_directions(problem, rng, tol, eps, directions, report, name, f=None, mode="rev"):
    """The directional check every mode shares: per random direction v of one leaf and a fixed
    random output cotangent u, <u, J v> from autodiff (`mode` "rev": <J^T u, v> through the VJP;
    "fwd": <u, J v> through the JVP) against central finite differences of f along v."""
    base, outs, u = _output_cotangents(problem, rng, f)
    if problem.fd_dtype != "float64":
        eps = max(eps, 1e-3)
    rounding = ROUNDING[problem.fd_dtype]
    for _ in range(directions):
        custom = problem.custom_vjp(u, f) if mode == "rev" else None
        for k, leaf_index in enumerate(problem.index):
            v = _random_like(rng, base[k].shape)
            if mode == "rev":
                got = float(np.sum(custom[k] * v))
            else:
                got = sum(float(np.sum(ui * g)) for ui, g in zip(u, problem.custom_jvp(k, v, outs)))
            f_plus, f_minus = _central_differences(problem, base, k, eps * v, f)
            terms = [ui * (fp - fm) / (2 * eps) for ui, fp, fm in zip(u, f_plus, f_minus)]
            fd = sum(float(np.sum(t)) for t in terms)
            scale = sum(float(np.sum(np.abs(t))) for t in terms)
            error = abs(got - fd) if math.isfinite(got) else math.inf
            fd_noise = rounding * sum(
                float(np.sum(np.abs(ui) * (np.abs(fp) + np.abs(fm))))
                for ui, fp, fm in zip(u, f_plus, f_minus)) / (2 * eps)
            allowed = tol[0] * math.sqrt(v.size) + tol[1] * max(scale, abs(fd)) + fd_noise
            report.checks.append(Check(name, problem.paths[leaf_index], error, allowed))


def _worst_element(name, path, got, expected, tol, index_text=None) -> Check:
    """One Check for the element of `got` furthest outside its tolerance around `expected`."""
    err = np.abs(got - expected)
    if err.size == 0:
        return Check(name, path, 0.0, tol[0])
    allowed = tol[0] + tol[1] * np.abs(expected)
    ratio = np.where(np.isfinite(err), err / allowed, np.inf)
    at = np.unravel_index(int(np.argmax(ratio)), err.shape)
    if index_text is None:
        index_text = lambda at: f"[{', '.join(map(str, at))}]" if at else ""  # noqa: E731
    error = float(err[at]) if np.isfinite(err[at]) else math.inf
    return Check(name, path + index_text(at), error, float(allowed[at]))


def _check_jacobian(problem, tol, eps, report):
    """The full Jacobian: the directional differences along each unit direction, element by
    element against the rows J^T e_k from autodiff."""
    base = [as_float64_array(v) for v in problem.values]
    outs = problem.call_float64(base)
    n_in = sum(b.size for b in base)
    n_out = sum(o.size for o in outs)
    if n_in * n_out > 4096:
        raise msg.check_jacobian_too_large(n_in, n_out)
    if problem.fd_dtype != "float64":
        eps = max(eps, 1e-3)
    rows = []  # rows[k]: J^T e_k for output element k, through autodiff
    for j, o in enumerate(outs):
        for idx in np.ndindex(o.shape):
            u = [np.zeros(x.shape) for x in outs]
            u[j][idx] = 1.0
            rows.append(problem.custom_vjp(u))
    for k, leaf_index in enumerate(problem.index):
        custom = np.stack([row[k] for row in rows], axis=-1)  # (*leaf shape, n_out)
        fd = np.zeros_like(custom)
        for idx in np.ndindex(base[k].shape):
            step = np.zeros(base[k].shape)
            step[idx] = eps
            f_plus, f_minus = _central_differences(problem, base, k, step)
            fd[idx] = np.concatenate([((fp - fm) / (2 * eps)).ravel()
                                      for fp, fm in zip(f_plus, f_minus)])
        report.checks.append(_worst_element(
            "Jacobian vs finite differences", problem.paths[leaf_index], custom, fd, tol,
            lambda at: (f"[{', '.join(map(str, at[:-1]))}]" if len(at) > 1 else "")
            + f" (output element {at[-1]})"))


def _check_against_autodiff(problem, rng, tol, report):
    forward = getattr(problem.f, "__customgrad_forward__", None)
    if forward is None:
        raise msg.check_not_custom(problem.f)

    def plain(*a, **kw):
        return forward(*a, **kw)[0]

    _, _, u = _output_cotangents(problem, rng)
    custom = problem.custom_vjp(u)
    auto = problem.custom_vjp(u, plain)
    for k, leaf_index in enumerate(problem.index):
        report.checks.append(_worst_element(
            "custom VJP vs plain autodiff", problem.paths[leaf_index], custom[k], auto[k], tol))


def _check_second_order(problem, rng, tol, eps, directions, report):
    """Checks G(x) = J(x)^T u (a fixed u) against finite differences of G: the VJP of the VJP."""
    base = [as_float64_array(v) for v in problem.values]
    u = [_random_like(rng, o.shape) for o in problem.call_float64(base)]

    def first_order(*args, **kwargs):
        leaves = _tree.flatten(args)
        values = [leaves[i] for i in problem.index]

        def at(*v):
            current = list(leaves)
            for i, x in zip(problem.index, v):
                current[i] = x
            return problem.f(*_tree.unflatten(problem.args, current), **kwargs)

        out, vjp_fn = vjp(at, *values)
        flat_out = _tree.flatten(out)
        cts = [keras.ops.convert_to_tensor(ui, dtype=dtype_name(o)) for ui, o in zip(u, flat_out)]
        grads = vjp_fn(_tree.unflatten(out, cts))
        return tuple(keras.ops.zeros_like(v) if g is None else g for g, v in zip(grads, values))

    first_order.__name__ = f"VJP of {msg.fn_name(problem.f)}"
    second = Problem(first_order, problem.args, problem.kwargs)
    _check_directions(second, rng, (tol[0] * 10, tol[1] * 10), eps * 10, directions, report,
                      "VJP of VJP vs finite differences")


_MODES = ("rev", "fwd")


def _checked_modes(modes) -> tuple:
    if isinstance(modes, str):
        modes = (modes,)
    if not isinstance(modes, (tuple, list)) or not modes or any(m not in _MODES for m in modes):
        raise msg.check_option("modes", "a non-empty tuple of 'rev' and 'fwd'", modes)
    return tuple(modes)
