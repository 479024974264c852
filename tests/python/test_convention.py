"""custom_gradient's calling convention, structures, dtypes and errors: the same on every backend."""

import re

import keras
import numpy as np
import pytest
from helpers import float64_enabled, native_grad, npy, t
from keras import ops

import customgrad
from customgrad import CustomGradientError

autodiff = pytest.mark.autodiff


# --- the seed documents' examples, verbatim ------------------------------------------------------
def keras_backend_agnostic_log1pexp(x):
    e = ops.exp(x)

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))

    return ops.log(1 + e), grad


def keras_jax_tf_log1pexp(x):
    e = ops.exp(x)

    def grad(upstream):
        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))

    return ops.log(1 + e), grad


def keras_torch_log1pexp(x):
    e = ops.exp(x)

    def grad(*args, upstream):
        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))

    return ops.log(1 + e), grad


def tf_doc_log1pexp(x):
    e = ops.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return ops.log(1 + e), grad


IDIOMS = [keras_backend_agnostic_log1pexp, keras_jax_tf_log1pexp, keras_torch_log1pexp,
          tf_doc_log1pexp]


@autodiff
@pytest.mark.parametrize("idiom", IDIOMS, ids=lambda f: f.__name__)
def test_every_documented_idiom_gives_gradient_exactly_one_at_100(idiom):
    log1pexp = customgrad.custom_gradient(idiom)
    (g,) = native_grad(log1pexp, t(100.0))
    assert float(npy(g)) == 1.0
    assert float(npy(customgrad.grad(log1pexp)(t(100.0)))) == 1.0


@autodiff
def test_plain_autodiff_of_log1pexp_is_nan_at_100_the_problem_we_solve():
    (g,) = native_grad(lambda x: ops.log(1 + ops.exp(x)), t(100.0))
    assert np.isnan(npy(g))


@pytest.mark.parametrize("idiom", IDIOMS, ids=lambda f: f.__name__)
def test_forward_value_is_the_output_of_f(idiom):
    log1pexp = customgrad.custom_gradient(idiom)
    np.testing.assert_allclose(npy(log1pexp(t([0.0, 10.0]))), [np.log(2.0), 10.0000454], rtol=1e-6)


@autodiff
@pytest.mark.parametrize("x", [0.0, 10.0, -5.0, 3.5])
def test_custom_gradient_equals_sigmoid(x):
    log1pexp = customgrad.custom_gradient(tf_doc_log1pexp)
    g = customgrad.grad(log1pexp)(t(x))
    np.testing.assert_allclose(npy(g), 1 / (1 + np.exp(-x)), rtol=1e-5)


@autodiff
def test_tf1_variables_signature_without_variables_is_called_without_them():
    seen = {}

    def f(x):
        def grad(*grad_ys, variables=None):
            seen["variables"] = variables
            return grad_ys[0] * 3.0

        return x * 3.0, grad

    g = customgrad.grad(customgrad.custom_gradient(f))(t(1.0))
    assert float(npy(g)) == 3.0 and seen["variables"] is None


@autodiff
def test_decorator_and_call_forms_agree():
    as_call = customgrad.custom_gradient(tf_doc_log1pexp)

    @customgrad.custom_gradient
    def as_decorator(x):
        return tf_doc_log1pexp(x)

    x = t([1.0, 2.0])
    np.testing.assert_array_equal(npy(customgrad.vjp(as_call, x)[1](ops.ones((2,)))[0]),
                                  npy(customgrad.vjp(as_decorator, x)[1](ops.ones((2,)))[0]))
    assert as_call.__name__ == "tf_doc_log1pexp"


def test_a_grad_fns_signature_follows_its_defaults_not_only_its_code():
    # signatures are cached by code object and defaults: a function of the same code with other
    # defaults must be read anew, not given the first one's signature
    import types

    from customgrad._convention import inspect_grad_fn

    def grad(du, dv=None, *, upstream=None):
        return du

    twin = types.FunctionType(grad.__code__, grad.__globals__, "grad")  # no defaults at all
    with_defaults, without = inspect_grad_fn(grad), inspect_grad_fn(twin)
    assert (with_defaults.min_positional, with_defaults.max_positional) == (1, 2)
    assert (without.min_positional, without.max_positional) == (2, 2)
    assert inspect_grad_fn(grad) == with_defaults and inspect_grad_fn(twin) == without


def test_a_grad_fns_cached_signature_is_keyed_by_its_code_and_defaults_and_bounded():
    # a plain grad_fn's signature is cached under its code alone (by id, the entry holding the
    # code object so that the id is not reused); the same function given defaults afterwards is
    # another key, and the cache never grows past its bound
    from customgrad import _convention

    def grad(du, dv):
        return du

    assert (_convention.inspect_grad_fn(grad).min_positional,
            _convention.inspect_grad_fn(grad).max_positional) == (2, 2)
    code, sig = _convention._SIGNATURES[id(grad.__code__)]
    assert code is grad.__code__ and sig is _convention.inspect_grad_fn(grad)
    grad.__defaults__ = (None,)
    assert _convention.inspect_grad_fn(grad).min_positional == 1

    # an entry under the id of a code object that is not the one it holds is not used (an id
    # is reused once its object is gone)
    def upstream_only(*, upstream):
        return upstream

    _convention._SIGNATURES[id(upstream_only.__code__)] = (grad.__code__, _convention._ONE)
    assert _convention.inspect_grad_fn(upstream_only) is not _convention._ONE
    assert _convention._SIGNATURES[id(upstream_only.__code__)][0] is upstream_only.__code__
    for n in range(_convention._MAX_SIGNATURES + 1):
        _convention.inspect_grad_fn(eval(f"lambda dy{n}: dy{n}"))  # a new code object each
    assert len(_convention._SIGNATURES) <= _convention._MAX_SIGNATURES


def test_a_callable_that_states_its_signature_is_read_once_per_signature_object():
    # (the R package's grad functions: a callable object made every step, whose __signature__
    # is one object per R formals) cached by that object; another object is read anew
    import inspect

    from customgrad import _convention

    class Stated:
        def __init__(self, signature):
            self.__signature__ = signature

        def __call__(self, *args, **kwargs):
            return args

    P = inspect.Parameter
    keras_idiom = inspect.Signature([P("args", P.VAR_POSITIONAL),
                                     P("upstream", P.KEYWORD_ONLY, default=None)])
    sig = _convention.inspect_grad_fn(Stated(keras_idiom))
    assert (sig.min_positional, sig.max_positional, sig.upstream_keyword) == (0, None, True)
    assert _convention._SIGNATURES[id(keras_idiom)] == (keras_idiom, sig)
    assert _convention.inspect_grad_fn(Stated(keras_idiom)) is sig
    two = inspect.Signature([P("du", P.POSITIONAL_OR_KEYWORD), P("dv", P.POSITIONAL_OR_KEYWORD)])
    sig = _convention.inspect_grad_fn(Stated(two))
    assert (sig.min_positional, sig.max_positional, sig.upstream_keyword) == (2, 2, False)
    # while torch.compile traces (introspect=False) nothing is written
    traced = inspect.Signature([P("dy", P.POSITIONAL_OR_KEYWORD)])
    assert _convention.inspect_grad_fn(Stated(traced), introspect=False).max_positional == 1
    assert id(traced) not in _convention._SIGNATURES


# --- multiple and nested outputs -----------------------------------------------------------------
@autodiff
def test_tuple_output_gets_one_positional_upstream_per_output_and_upstream_keyword():
    received = {}

    @customgrad.custom_gradient
    def two(x):
        def grad(*args, **kwargs):
            received["positional"] = len(args)
            received["keywords"] = sorted(kwargs)  # **kwargs alone receives no upstream=
            dy_sum, dy_prod = args
            return dy_sum + dy_prod * 2.0 * x

        return (x + 1.0, x * x), grad

    @customgrad.custom_gradient
    def two_kw(x):
        def grad(*args, upstream):
            received["upstream"] = upstream
            s, p = upstream
            return s + p * 2.0 * x

        return (x + 1.0, x * x), grad

    def loss(fn):
        def weighted(x):
            plus_one, squared = fn(x)
            return plus_one * 5.0 + squared * 7.0
        return weighted

    x = t(3.0)
    for fn in (two, two_kw):
        assert float(npy(customgrad.grad(loss(fn))(x))) == 5.0 + 7.0 * 6.0
    assert received["positional"] == 2 and received["keywords"] == []
    assert isinstance(received["upstream"], tuple) and len(received["upstream"]) == 2


@autodiff
def test_nested_dict_output_arrives_as_one_upstream_with_its_structure():
    @customgrad.custom_gradient
    def f(x):
        def grad(dy):
            assert sorted(dy) == ["a", "b"] and isinstance(dy["b"], list)
            return dy["a"] * 2.0 + dy["b"][0] * 3.0 + dy["b"][1] * 4.0

        return {"a": x * 2.0, "b": [x * 3.0, x * 4.0]}, grad

    g = customgrad.grad(lambda x: ops.sum(f(x)["a"]) + ops.sum(f(x)["b"][1]))(t(1.0))
    assert float(npy(g)) == 6.0


@autodiff
def test_unused_outputs_reach_grad_fn_as_zeros_of_their_shape_and_dtype():
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy_used, dy_unused):
            seen["shape"], seen["dtype"] = tuple(dy_unused.shape), dy_unused.dtype
            # its values show up in the gradient: 1 + sum(|dy_unused|) must stay 1
            return dy_used + ops.cast(ops.sum(ops.abs(dy_unused)), dy_used.dtype)

        return (x * 1.0, ops.cast(ops.ones((2, 3)), "float16")), grad

    g = customgrad.grad(lambda x: ops.sum(f(x)[0]))(t([1.0, 2.0]))
    np.testing.assert_array_equal(npy(g), [1.0, 1.0])
    assert seen["shape"] == (2, 3)
    assert keras.backend.standardize_dtype(seen["dtype"]) == "float16"


@autodiff
def test_integer_outputs_pass_through_and_get_none_upstream():
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, d_index):
            seen["index"] = d_index
            return dy * 2.0

        return (x * 2.0, ops.argmax(x)), grad

    g = customgrad.grad(lambda x: ops.sum(f(x)[0]))(t([1.0, 5.0]))
    np.testing.assert_array_equal(npy(g), [2.0, 2.0])
    assert seen["index"] is None
    assert int(npy(f(t([1.0, 5.0]))[1])) == 1


# --- nested inputs, keyword arguments, non-tensor arguments --------------------------------------
@autodiff
def test_nested_inputs_with_structured_gradients():
    @customgrad.custom_gradient
    def f(params, x):
        w, b = params["w"], params["b"]
        y = w * x + b[0]

        def grad(dy):
            return {"w": dy * x, "b": (dy, None)}, dy * w

        return y, grad

    params = {"w": t([2.0, 3.0]), "b": (t([1.0, 1.0]), t([9.0, 9.0]))}
    gp, gx = customgrad.grad(lambda p, x: ops.sum(f(p, x)), argnums=(0, 1))(params, t([5.0, 7.0]))
    np.testing.assert_array_equal(npy(gp["w"]), [5.0, 7.0])
    np.testing.assert_array_equal(npy(gp["b"][0]), [1.0, 1.0])
    np.testing.assert_array_equal(npy(gp["b"][1]), [0.0, 0.0])
    np.testing.assert_array_equal(npy(gx), [2.0, 3.0])


@autodiff
def test_flattened_gradients_are_accepted():
    @customgrad.custom_gradient
    def f(params, x):
        y = params["w"] * x + params["b"]
        return y, lambda dy: [dy, dy * x, dy * params["w"]]  # leaves: b, w (sorted keys), x

    params = {"w": t(2.0), "b": t(1.0)}
    gp, gx = customgrad.grad(lambda p, x: f(p, x), argnums=(0, 1))(params, t(5.0))
    assert (float(npy(gp["b"])), float(npy(gp["w"])), float(npy(gx))) == (1.0, 5.0, 2.0)


@autodiff
def test_none_gradient_means_zero():
    @customgrad.custom_gradient
    def f(x, y):
        return x * y, lambda dy: (None, dy * x)

    gx, gy = customgrad.grad(f, argnums=(0, 1))(t(2.0), t(3.0))
    assert float(npy(gx)) == 0.0 and float(npy(gy)) == 2.0


@autodiff
def test_non_tensor_arguments_pass_through_untouched_and_get_no_gradient():
    seen = {}

    @customgrad.custom_gradient
    def f(x, scale, axis, name, nothing, flag=True, mode="sum", weight=0.5):
        seen.update(scale=scale, axis=axis, name=name, nothing=nothing, flag=flag, mode=mode,
                    weight=weight)
        return x * scale, lambda dy: (dy * scale, None, None, None, None)

    g = customgrad.grad(lambda x: f(x, 3.0, 0, "label", None, flag=False, mode="mean"))(t(1.0))
    assert float(npy(g)) == 3.0
    # a positional Python float becomes a tensor, as tf.custom_gradient and jax.custom_gradient
    # hand f; ints, strings, None and keyword arguments stay as they are
    assert keras.ops.is_tensor(seen.pop("scale"))
    assert seen == dict(axis=0, name="label", nothing=None, flag=False, mode="mean", weight=0.5)
    assert type(seen["axis"]) is int and type(seen["weight"]) is float


@autodiff
def test_tensor_keyword_arguments_are_constants():
    @customgrad.custom_gradient
    def f(x, *, weight):
        return x * weight, lambda dy: dy * weight

    g_x = customgrad.grad(lambda x: f(x, weight=t(5.0)))(t(2.0))
    assert float(npy(g_x)) == 5.0


@autodiff
def test_differentiating_a_tensor_passed_by_keyword_is_an_error():
    # it was 0 on jax and tensorflow and 2.0 (f's own ops) on torch, with no error
    @customgrad.custom_gradient
    def f(x, *, weight):
        return x * weight, lambda dy: dy * weight

    with pytest.raises(CustomGradientError, match=re.escape(
            "`test_differentiating_a_tensor_passed_by_keyword_is_an_error.<locals>.f` uses the "
            "tensor passed by keyword `weight`, which is being differentiated; a custom gradient "
            "defines gradients for the positional arguments only (grad_fn returns one per "
            "positional argument), so this one would be lost. Pass it as a positional argument "
            "and return its gradient from grad_fn.")):
        customgrad.grad(lambda x, w: f(x, weight=w), argnums=(0, 1))(t(2.0), t(5.0))


@autodiff
def test_integer_and_bool_tensors_get_no_gradient():
    @customgrad.custom_gradient
    def f(x, idx, mask):
        y = ops.where(mask, ops.take(x, idx), 0.0)
        return y, lambda dy: (ops.scatter(ops.expand_dims(idx, 1), dy * ops.cast(mask, dy.dtype),
                                          (3,)), "ignored", "ignored")

    idx = ops.convert_to_tensor(np.array([0, 2], dtype="int32"))
    mask = ops.convert_to_tensor(np.array([True, False]))
    _, vjp_fn = customgrad.vjp(f, t([1.0, 2.0, 3.0]), idx, mask)
    gx, gi, gm = vjp_fn(ops.ones((2,)))
    np.testing.assert_array_equal(npy(gx), [1.0, 0.0, 0.0])
    assert gi is None and gm is None


# --- dtypes ---------------------------------------------------------------------------------------
@autodiff
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gradients_come_back_in_each_inputs_dtype(dtype):
    @customgrad.custom_gradient
    def f(x, y):
        # grad_fn deliberately returns float32: customgrad casts to each input's dtype
        return x * ops.cast(y, x.dtype), lambda dy: (ops.cast(dy, "float32") * 2.0,
                                                     ops.cast(dy, "float32") * 3.0)

    with float64_enabled():  # JAX has float64 only in its x64 mode
        x = ops.cast(t([1.0, 2.0]), dtype)
        y = t([1.0, 1.0], "float64")
        gx, gy = customgrad.vjp(f, x, y)[1](ops.ones((2,), dtype=dtype))
    assert keras.backend.standardize_dtype(gx.dtype) == dtype
    assert keras.backend.standardize_dtype(gy.dtype) == "float64"
    np.testing.assert_array_equal(npy(ops.cast(gx, "float32")), [2.0, 2.0])


# --- errors that name the function, what was expected and what was received ----------------------
def test_f_not_callable():
    with pytest.raises(TypeError, match=re.escape(
            "customgrad.custom_gradient: expected a callable f(*args) returning (output, "
            "grad_fn); received an int.")):
        customgrad.custom_gradient(3)


def test_f_not_returning_a_pair():
    @customgrad.custom_gradient
    def returns_tensor(x):
        return x * 2.0

    with pytest.raises(CustomGradientError, match=re.escape(
            "customgrad.custom_gradient: `test_f_not_returning_a_pair.<locals>.returns_tensor` "
            "must return a pair (output, grad_fn); received a ")):
        returns_tensor(t([1.0]))


def test_f_returning_a_triple():
    @customgrad.custom_gradient
    def triple(x):
        return x, lambda dy: dy, "extra"

    with pytest.raises(CustomGradientError, match="must return a pair \\(output, grad_fn\\); "
                                                  "received a tuple of length 3"):
        triple(t([1.0]))


def test_grad_fn_not_callable():
    @customgrad.custom_gradient
    def bad(x):
        return x, "not a function"

    with pytest.raises(CustomGradientError, match=re.escape(
            "the second element returned by `test_grad_fn_not_callable.<locals>.bad` must be a "
            "callable grad_fn; received a str.")):
        bad(t([1.0]))


@autodiff
def test_wrong_number_of_gradients():
    @customgrad.custom_gradient
    def two_args(x, y):
        return x * y, lambda dy: (dy, dy, dy)

    with pytest.raises(CustomGradientError, match=re.escape(
            "must return one gradient per positional argument (2: ")) as info:
        customgrad.grad(two_args)(t(1.0), t(2.0))
    assert "received a tuple of length 3" in str(info.value)
    assert "two_args" in str(info.value)


@autodiff
def test_wrong_structure_of_gradients_names_the_place():
    @customgrad.custom_gradient
    def f(d):
        return d["a"] * d["b"], lambda dy: {"a": dy, "c": dy}

    with pytest.raises(CustomGradientError, match=re.escape(
            "received a dict with keys ['a', 'c']")):
        customgrad.grad(f)({"a": t(1.0), "b": t(2.0)})


@autodiff
def test_gradient_with_wrong_shape_is_an_error_never_broadcast():
    @customgrad.custom_gradient
    def f(x):
        return ops.sum(x), lambda dy: dy  # shape () for an input of shape (3,)

    with pytest.raises(CustomGradientError, match=re.escape(
            "returned a gradient of shape () for args[0], which has shape (3,); gradients must "
            "have their input's shape")):
        customgrad.grad(f)(t([1.0, 2.0, 3.0]))


# An exact Python zero (0 or 0.0, not a bool) as a gradient: zeros of its input's shape and dtype
# (YOLO's loss in TF Model Garden returns 0.0 for its anchors, which tf.custom_gradient passes).
ANCHORS_SHAPE = (1, 13, 13, 3, 2)


def _loss_with_undifferentiated_anchors(zero):
    @customgrad.custom_gradient
    def loss(x, anchors):
        value = ops.sum(x * 2.0) + ops.cast(ops.sum(anchors), x.dtype)
        return value, lambda dy: (dy * 2.0 * ops.ones_like(x), zero)

    return loss


def _assert_zeros_of(g, like):
    assert tuple(g.shape) == tuple(like.shape)
    assert keras.backend.standardize_dtype(g.dtype) == keras.backend.standardize_dtype(like.dtype)
    np.testing.assert_array_equal(npy(g), np.zeros(tuple(like.shape)))


@autodiff
@pytest.mark.parametrize("zero", [0.0, 0, -0.0], ids=["float", "int", "negative_float"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_an_exact_python_zero_gradient_is_zeros_of_its_inputs_shape_and_dtype(zero, dtype):
    x, anchors = t([1.0, 2.0]), t(np.ones(ANCHORS_SHAPE), dtype)
    gx, ganchors = customgrad.grad(_loss_with_undifferentiated_anchors(zero), argnums=(0, 1))(
        x, anchors)
    np.testing.assert_allclose(npy(gx), [2.0, 2.0])
    _assert_zeros_of(ganchors, anchors)


@autodiff
def test_an_exact_zero_gradient_is_zeros_with_the_backends_own_autodiff():
    x, anchors = t([1.0, 2.0]), t(np.ones(ANCHORS_SHAPE))
    gx, ganchors = native_grad(_loss_with_undifferentiated_anchors(0.0), x, anchors)
    np.testing.assert_allclose(npy(gx), [2.0, 2.0])
    _assert_zeros_of(ganchors, anchors)


@autodiff
def test_an_exact_zero_gradient_is_zeros_for_one_input_and_inside_a_structure():
    @customgrad.custom_gradient
    def single(x):
        return ops.sum(x), lambda dy: 0

    x = t(np.ones((3, 2)))
    _assert_zeros_of(customgrad.grad(single)(x), x)

    @customgrad.custom_gradient
    def structured(d):
        return ops.sum(d["a"]) + ops.sum(d["b"][0]), lambda dy: {"a": dy * ops.ones_like(d["a"]),
                                                                  "b": [0.0]}

    d = {"a": t([1.0, 2.0]), "b": [t(np.ones((4, 2)))]}
    g = customgrad.grad(structured)(d)
    np.testing.assert_allclose(npy(g["a"]), [1.0, 1.0])
    _assert_zeros_of(g["b"][0], d["b"][0])

    @customgrad.custom_gradient
    def flat(d):  # the flat form: one entry per tensor leaf
        return ops.sum(d["a"]) + ops.sum(d["b"][0]), lambda dy: [dy * ops.ones_like(d["a"]), 0]

    _assert_zeros_of(customgrad.grad(flat)(d)["b"][0], d["b"][0])


@autodiff
def test_an_exact_zero_gradient_for_a_variable_is_zeros_of_its_shape():
    from test_framework_variables import keras_variable_grads

    weight, bias = keras.Variable(np.ones((2, 3)), dtype="float32"), keras.Variable(
        [1.0, 2.0, 3.0])

    @customgrad.custom_gradient
    def loss():
        def grad(dy, variables=None):
            return [], [0.0 if v is weight else dy * ops.ones((3,)) for v in variables]

        return ops.sum(weight.value) + ops.sum(bias.value), grad

    g_weight, g_bias = keras_variable_grads(loss, [weight, bias])
    _assert_zeros_of(g_weight, weight)
    np.testing.assert_allclose(npy(g_bias), [1.0, 1.0, 1.0])


@autodiff
def test_an_exact_zero_gradient_is_zeros_when_compiled():
    loss = _loss_with_undifferentiated_anchors(0.0)
    x, anchors = t([1.0, 2.0]), t(np.ones(ANCHORS_SHAPE))
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(customgrad.grad(loss, argnums=(0, 1)))
        gx, ganchors = compiled(x, anchors)
    elif backend == "jax":
        import jax

        gx, ganchors = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, anchors)
    else:
        import torch

        compiled = torch.compile(lambda x, a: loss(x, a))
        x, anchors = x.requires_grad_(True), anchors.requires_grad_(True)
        compiled(x, anchors).backward()
        gx, ganchors = x.grad, anchors.grad
    np.testing.assert_allclose(npy(gx), [2.0, 2.0])
    _assert_zeros_of(ganchors, anchors)


@autodiff
@pytest.mark.parametrize("number", [1.0, 2, False, np.float64(0.0)],
                         ids=["one", "int_two", "false", "numpy_zero"])
def test_a_number_other_than_an_exact_python_zero_for_a_vector_is_the_shape_error(number):
    # a bool is no zero gradient, and neither is a numpy zero: each is a gradient of shape ()
    @customgrad.custom_gradient
    def f(x):
        return ops.sum(x), lambda dy: number

    with pytest.raises(customgrad.GradFnResultError, match=re.escape(
            "returned a gradient of shape () for args[0], which has shape (3,)")):
        customgrad.grad(f)(t([1.0, 2.0, 3.0]))


def test_exception_in_f_propagates_unchanged_and_f_runs_once():
    calls = []

    class Boom(Exception):
        pass

    @customgrad.custom_gradient
    def f(x):
        calls.append(1)
        raise Boom("from f")

    with pytest.raises(Boom, match=r"^from f$"):
        f(t([1.0]))
    assert len(calls) == 1


@autodiff
def test_f_runs_exactly_once_per_call_with_and_without_gradients():
    calls = []

    @customgrad.custom_gradient
    def f(x):
        calls.append(1)
        return x * 2.0, lambda dy: dy * 2.0

    f(t(1.0))
    assert len(calls) == 1
    customgrad.grad(f)(t(1.0))
    assert len(calls) == 2


@autodiff
def test_exception_in_grad_fn_propagates():
    @customgrad.custom_gradient
    def f(x):
        def grad(dy):
            raise ArithmeticError("grad failed")

        return x * 2.0, grad

    with pytest.raises(ArithmeticError, match="grad failed"):
        customgrad.grad(f)(t(1.0))


@pytest.mark.backends("numpy")
def test_numpy_forward_works_without_warnings(recwarn):
    log1pexp = customgrad.custom_gradient(tf_doc_log1pexp)
    for _ in range(3):
        np.testing.assert_allclose(log1pexp(np.array([0.0, 10.0])), [np.log(2.0), 10.0000454],
                                   rtol=1e-6)
    assert len(recwarn) == 0


@pytest.mark.backends("numpy")
def test_numpy_backend_says_no_gradient_can_be_taken():
    with pytest.raises(NotImplementedError, match="'numpy' Keras backend has no autodiff"):
        customgrad.grad(lambda x: x * 2.0)(np.array(1.0))
