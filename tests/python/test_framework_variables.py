"""Variables the framework owns, read inside f without being passed to it: tf.Variables (a
tf.Module's), torch tensors that require grad (an nn.Parameter, a torch module's weights), and
keras.Variables read by an f with no tensor arguments. Each gets its gradient from grad_fn through
`variables=`, or, when grad_fn does not accept `variables`, a CustomGradientError: never a
gradient silently missing or computed by autodiff past grad_fn."""

import re
import types

import keras
import numpy as np
import pytest
from helpers import BACKEND, npy, t, torch_device
from keras import ops

import customgrad
from customgrad import CustomGradientError

pytestmark = pytest.mark.autodiff

if BACKEND == "tensorflow":
    import tensorflow as tf
if BACKEND == "torch":
    import torch


def keras_variable_grads(fn, variables):
    """Gradients of the scalar fn() with respect to keras.Variables, with the backend's own tool
    (jax: the values bound in a StatelessScope, as model.fit does)."""
    if BACKEND == "jax":
        import jax
        from keras import StatelessScope

        def loss(values):
            with StatelessScope(state_mapping=list(zip(variables, values))):
                return fn()

        return list(jax.grad(loss)([v.value for v in variables]))
    if BACKEND == "tensorflow":
        with tf.GradientTape() as tape:
            y = fn()
        return tape.gradient(y, [v.value for v in variables])
    values = [v.value for v in variables]
    for value in values:
        value.grad = None
    fn().backward()
    return [value.grad for value in values]


# -- every backend: an f with no tensor arguments -----------------------------------------------

def test_f_without_tensor_arguments_reading_a_keras_variable_uses_grad_fn():
    v = keras.Variable(np.array([2.0, 3.0], dtype="float32"), name="v")
    seen = {}

    @customgrad.custom_gradient
    def f():
        def grad(dy, variables=None):
            seen["variables"] = variables
            return (), [ops.full((2,), 100.0) * dy]  # autodiff would give 2v + 1 = [5, 7]

        return ops.sum(v * v + v), grad

    (g,) = keras_variable_grads(f, [v])
    np.testing.assert_array_equal(npy(g), [100.0, 100.0])
    assert seen["variables"] == [v]


def test_f_without_tensor_arguments_whose_grad_fn_lacks_variables_is_an_error():
    v = keras.Variable(np.array([2.0, 3.0], dtype="float32"), name="lonely")

    @customgrad.custom_gradient
    def f():
        return ops.sum(v * v), lambda dy: ()

    with pytest.raises(CustomGradientError, match=re.escape(
            "read the trainable variables ['lonely'], so its grad_fn")):
        keras_variable_grads(f, [v])


def test_f_without_tensor_arguments_and_no_variables_returns_its_output():
    @customgrad.custom_gradient
    def f():
        return ops.ones((2,)) * 3.0, lambda dy: ()

    np.testing.assert_array_equal(npy(f()), [3.0, 3.0])


@pytest.mark.backends("jax")
def test_jax_has_no_hidden_variables_only_keras_variables_are_found():
    # jax arrays are immutable values: a read "variable" is a keras.Variable (found above) or a
    # closed-over array, which jax.custom_vjp treats as a constant
    import jax

    w = jax.numpy.asarray([2.0, 3.0])

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            assert variables is None  # nothing read: none passed
            return ops.ones_like(x) * dy * 10.0

        return ops.sum(x * w), grad

    g = jax.grad(f)(t([1.0, 1.0]))
    np.testing.assert_array_equal(npy(g), [10.0, 10.0])


# -- tensorflow: tf.Variables --------------------------------------------------------------------

def _tf_run(mode, fn):
    return fn() if mode == "eager" else tf.function(fn)()


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_tf_variable_read_inside_f_gets_its_gradient_from_grad_fn(mode):
    w = tf.Variable([2.0, 3.0], name="w")
    x = tf.constant([1.0, 2.0])
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen["variables"] = variables
            return dy * 10.0, [dy * 100.0]  # not w and x: marks grad_fn's gradients

        return x * w, grad

    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ops.sum(f(x))
        return tape.gradient(y, [x, w])

    gx, gw = _tf_run(mode, step)
    np.testing.assert_array_equal(npy(gx), [10.0, 10.0])
    np.testing.assert_array_equal(npy(gw), [100.0, 100.0])
    assert seen["variables"] == [w]


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_tf_variable_read_by_grad_fn_without_variables_is_an_error(mode):
    w = tf.Variable([2.0, 3.0], name="hidden_w")
    x = tf.constant([1.0, 2.0])

    @customgrad.custom_gradient
    def f(x):
        return x * w, lambda dy: dy * 10.0

    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ops.sum(f(x))
        return tape.gradient(y, [x, w])

    with pytest.raises(CustomGradientError, match=re.escape(
            "read the trainable variables ['hidden_w:0'], so its grad_fn")):
        _tf_run(mode, step)


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_tf_module_variables_are_all_passed_to_grad_fn(mode):
    class Affine(tf.Module):
        def __init__(self):
            super().__init__(name="affine")
            self.scale = tf.Variable([2.0, 2.0], name="scale")
            self.shift = tf.Variable([1.0, 1.0], name="shift")

    module = Affine()
    x = tf.constant([1.0, 2.0])
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, *, variables=None):  # keyword-only, as TensorFlow's tests also write it
            seen["variables"] = variables
            by_name = {"scale": dy * 30.0, "shift": dy * 40.0}
            return dy * 10.0, [by_name[v.name.split(":")[0]] for v in variables]

        return x * module.scale + module.shift, grad

    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ops.sum(f(x))
        return tape.gradient(y, [x, module.scale, module.shift])

    gx, gscale, gshift = _tf_run(mode, step)
    np.testing.assert_array_equal(npy(gx), [10.0, 10.0])
    np.testing.assert_array_equal(npy(gscale), [30.0, 30.0])
    np.testing.assert_array_equal(npy(gshift), [40.0, 40.0])
    assert {id(v) for v in seen["variables"]} == {id(module.scale), id(module.shift)}


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_tf_variable_read_by_f_without_tensor_arguments_uses_grad_fn(mode):
    w = tf.Variable([2.0, 3.0])

    @customgrad.custom_gradient
    def f():
        def grad(dy, variables=None):
            return None, [ops.full((2,), 100.0) * dy]

        return ops.sum(w * w + w), grad  # autodiff would give [5, 7]

    def step():
        with tf.GradientTape() as tape:
            y = f()
        return tape.gradient(y, w)

    np.testing.assert_array_equal(npy(_tf_run(mode, step)), [100.0, 100.0])


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_non_trainable_and_integer_tf_variables_are_not_passed(mode):
    # as tf.custom_gradient: TensorFlow watches trainable variables only, and an integer one has
    # no gradient
    frozen = tf.Variable([5.0, 5.0], trainable=False)
    count = tf.Variable(3)
    x = tf.constant([1.0, 2.0])

    @customgrad.custom_gradient
    def f(x):
        return x * frozen + tf.cast(count, tf.float32), lambda dy: dy * 10.0

    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ops.sum(f(x))
        return tape.gradient(y, x)

    np.testing.assert_array_equal(npy(_tf_run(mode, step)), [10.0, 10.0])


@pytest.mark.backends("tensorflow")
def test_tf_variable_passed_as_an_argument_is_an_input_not_a_variable():
    w = tf.Variable([2.0, 3.0])

    @customgrad.custom_gradient
    def f(a):
        return a * a, lambda dy: dy * 10.0  # no variables=: w is an argument

    with tf.GradientTape() as tape:
        y = ops.sum(f(w))
    np.testing.assert_array_equal(npy(tape.gradient(y, w)), [10.0, 10.0])


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_keras_and_tf_variables_read_together_each_get_their_gradient(mode):
    kv = keras.Variable(np.array([1.0, 1.0], dtype="float32"), name="kv")
    tv = tf.Variable([1.0, 1.0], name="tv")
    x = tf.constant([1.0, 2.0])
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen["variables"] = variables
            return dy, [dy * 20.0, dy * 30.0]

        return x * kv + x * tv, grad

    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ops.sum(f(x))
        return tape.gradient(y, [kv.value, tv])

    gk, gt = _tf_run(mode, step)
    assert seen["variables"][0] is kv and seen["variables"][1] is tv  # keras ones first
    np.testing.assert_array_equal(npy(gk), [20.0, 20.0])
    np.testing.assert_array_equal(npy(gt), [30.0, 30.0])


def _tf1_dense(kwonly):
    """A custom-gradient dense layer that creates its kernel with get_variable, in the style of
    TensorFlow's own variable tests; grad_fn returns ones for the kernel."""
    v1 = tf.compat.v1

    def grad_body(out, x, out_grad, variables):
        assert len(variables) == 1
        (gx,) = tf.gradients(out, [x], grad_ys=out_grad)
        return gx, [tf.ones((4, 3))]

    @customgrad.custom_gradient
    def dense(x):
        kernel = v1.get_variable("kernel", shape=(4, 3), initializer=v1.ones_initializer())
        out = tf.matmul(x, kernel)
        if kwonly:
            def grad(out_grad, *, variables=None):
                return grad_body(out, x, out_grad, variables)
        else:
            def grad(out_grad, variables=None):
                return grad_body(out, x, out_grad, variables)
        return out, grad

    return dense


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("kwonly", [False, True], ids=["variables", "kwonly-variables"])
@pytest.mark.parametrize("nested", [False, True], ids=["single", "nested"])
def test_tf1_graph_variable_created_inside_f_gets_grad_fn_gradient(kwonly, nested):
    v1 = tf.compat.v1
    dense = _tf1_dense(kwonly)

    @customgrad.custom_gradient
    def twice(x):  # a custom gradient around one that reads the variable: both see it
        out = dense(x)

        def grad(out_grad, variables=None):
            assert len(variables) == 1
            (gx,) = tf.gradients(out, [x], grad_ys=out_grad)
            return gx, [tf.ones((4, 3)) * 2.0]

        return out, grad

    with tf.Graph().as_default():
        x = tf.ones((2, 4))
        with v1.variable_scope("layer", use_resource=True) as scope:
            y = twice(x) if nested else dense(x)
            (kernel,) = scope.global_variables()
        gx, gk = tf.gradients(y, [x, kernel])
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            gx, gk = session.run([gx, gk])
    np.testing.assert_array_equal(gx, np.full((2, 4), 3.0))  # through the kernel of ones
    np.testing.assert_array_equal(gk, np.full((4, 3), 2.0 if nested else 1.0))


@pytest.mark.backends("tensorflow")
def test_tf1_graph_variable_read_by_grad_fn_without_variables_is_an_error():
    v1 = tf.compat.v1

    @customgrad.custom_gradient
    def dense(x):
        kernel = v1.get_variable("k", shape=(4, 3), initializer=v1.ones_initializer())
        return tf.matmul(x, kernel), lambda dy: tf.matmul(dy, tf.ones((3, 4)))

    with tf.Graph().as_default():
        with v1.variable_scope("bad", use_resource=True):
            y = dense(tf.ones((2, 4)))
        with pytest.raises(CustomGradientError, match=re.escape(
                "read the trainable variables ['bad/k:0']")):
            tf.gradients(y, v1.trainable_variables())


# -- torch: tensors that require grad --------------------------------------------------------

def _torch_lin():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1, bias=False, device=torch_device())


@pytest.mark.backends("torch")
@pytest.mark.parametrize("path", ["plain tensors", "keyword argument"])
def test_torch_parameter_read_inside_f_gets_its_gradient_from_grad_fn(path):
    # the plain-tensor call takes the short path; a keyword argument the general one
    w = torch.nn.Parameter(torch.tensor([2.0, 3.0], device=torch_device()))
    x = torch.tensor([1.0, 2.0], requires_grad=True, device=torch_device())
    seen = {}

    @customgrad.custom_gradient
    def f(x, scale=1.0):
        def grad(dy, variables=None):
            seen["variables"] = variables
            return dy * 10.0, [dy * 100.0]

        return x * w * scale, grad

    y = f(x) if path == "plain tensors" else f(x, scale=1.0)
    y.sum().backward()
    np.testing.assert_array_equal(npy(x.grad), [10.0, 10.0])
    np.testing.assert_array_equal(npy(w.grad), [100.0, 100.0])
    assert len(seen["variables"]) == 1 and seen["variables"][0] is w


@pytest.mark.backends("torch")
def test_torch_module_weights_read_by_grad_fn_without_variables_is_an_error_naming_them():
    lin = _torch_lin()
    x = torch.ones(2, 3, requires_grad=True, device=torch_device())

    @customgrad.custom_gradient
    def f(x):
        return lin(x), lambda dy: dy @ lin.weight

    y = f(x).sum()
    with pytest.raises(CustomGradientError, match=re.escape(
            "`test_torch_module_weights_read_by_grad_fn_without_variables_is_an_error_naming_them"
            ".<locals>.f` used tensors that require grad without receiving them as arguments: "
            "the parameter 'lin.weight' (shape (1, 3))")) as info:
        y.backward()
    assert "as positional arguments, or let grad_fn accept `variables=`" in str(info.value)


@pytest.mark.backends("torch")
@pytest.mark.parametrize("kind", ["leaf", "view of a flat parameter (FSDP1)"])
def test_torch_leaf_tensor_closed_over_without_variables_is_an_error_with_its_shape(kind):
    """Never a gradient dropped silently: a view, computed before f ran, too."""
    if kind == "leaf":
        holder = types.SimpleNamespace(weight=torch.ones(2, requires_grad=True,
                                                         device=torch_device()))
    else:
        holder = _Holder(torch.nn.Parameter(torch.ones(4, device=torch_device())))

    @customgrad.custom_gradient
    def f(x):
        return x * holder.weight, lambda dy: dy

    y = f(torch.ones(2, requires_grad=True, device=torch_device())).sum()
    with pytest.raises(CustomGradientError, match=re.escape(
            "without receiving them as arguments: a tensor of shape (2,).")):
        y.backward()


@pytest.mark.backends("torch")
def test_torch_parameter_read_by_f_without_tensor_arguments_uses_grad_fn():
    w = torch.nn.Parameter(torch.tensor([2.0, 3.0], device=torch_device()))

    @customgrad.custom_gradient
    def f():
        def grad(dy, variables=None):
            return (), [torch.full((2,), 100.0, device=torch_device()) * dy]

        return (w * w + w).sum(), grad  # autodiff would give [5, 7]

    f().backward()
    np.testing.assert_array_equal(npy(w.grad), [100.0, 100.0])


@pytest.mark.backends("torch")
def test_torch_keras_variable_and_parameter_read_together_each_get_their_gradient():
    kv = keras.Variable(np.array([1.0, 1.0], dtype="float32"), name="kv")
    p = torch.nn.Parameter(torch.ones(2, device=torch_device()))
    x = torch.tensor([1.0, 2.0], requires_grad=True, device=torch_device())
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen["variables"] = variables
            return dy, [dy * 20.0, dy * 30.0]

        return x * kv + x * p, grad

    f(x).sum().backward()
    assert seen["variables"][0] is kv and seen["variables"][1] is p  # keras ones first
    np.testing.assert_array_equal(npy(kv.value.grad), [20.0, 20.0])
    np.testing.assert_array_equal(npy(p.grad), [30.0, 30.0])


@pytest.mark.backends("torch")
def test_torch_frozen_parameter_and_no_grad_need_no_variables():
    frozen = torch.nn.Parameter(torch.tensor([5.0, 5.0], device=torch_device()),
                                requires_grad=False)
    live = torch.nn.Parameter(torch.tensor([1.0, 1.0], device=torch_device()))

    @customgrad.custom_gradient
    def f(x):
        return x * frozen, lambda dy: dy * 10.0

    @customgrad.custom_gradient
    def g(x):
        return x * live, lambda dy: dy * 10.0  # would be an error if a gradient were taken

    x = torch.tensor([1.0, 2.0], requires_grad=True, device=torch_device())
    f(x).sum().backward()
    np.testing.assert_array_equal(npy(x.grad), [10.0, 10.0])
    with torch.no_grad():
        np.testing.assert_array_equal(npy(g(x)), [1.0, 2.0])


@pytest.mark.backends("torch")
def test_torch_input_returned_as_is_and_earlier_graph_are_not_hidden_variables():
    # the walk stops at the nodes made before f ran: the parameter upstream of the input belongs
    # to the caller's graph, and autodiff reaches it through the input's gradient
    p = torch.nn.Parameter(torch.tensor([2.0, 2.0], device=torch_device()))
    h = p * 3.0  # the input of f, computed from a parameter

    @customgrad.custom_gradient
    def f(x):
        return (x, x * 2.0), lambda d1, d2: d1 + d2 * 5.0

    a, b = f(h)
    (a.sum() + b.sum()).backward()
    np.testing.assert_array_equal(npy(p.grad), [18.0, 18.0])  # 3 * (1 + 5)


@pytest.mark.backends("torch")
def test_torch_module_inside_a_keras_layer_trains_through_grad_fn():
    class TorchDense(keras.layers.Layer):
        def __init__(self, accept_variables, **kwargs):
            super().__init__(**kwargs)
            self.lin = _torch_lin()
            self.accept_variables = accept_variables

        def call(self, x):
            @customgrad.custom_gradient
            def f(x):
                weight = self.lin.module.weight  # Keras wraps the module
                if self.accept_variables:
                    def grad(dy, variables=None):
                        assert len(variables) == 1 and variables[0] is weight
                        return dy @ weight, [torch.full_like(weight, 0.5)]
                else:
                    def grad(dy):
                        return dy @ weight
                return self.lin(x), grad

            return f(x)

    x = np.ones((4, 3), dtype="float32")
    y = np.zeros((4, 1), dtype="float32")
    layer = TorchDense(accept_variables=True)
    model = keras.Sequential([keras.Input((3,)), layer])
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    before = layer.lin.module.weight.detach().clone()
    model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    # plain SGD with lr 1: the step is exactly grad_fn's 0.5, whatever autodiff would say
    np.testing.assert_allclose(npy(before - layer.lin.module.weight.detach()), np.full((1, 3), 0.5))

    bad = keras.Sequential([keras.Input((3,)), TorchDense(accept_variables=False)])
    bad.compile(optimizer="sgd", loss="mse")
    with pytest.raises(CustomGradientError, match=re.escape("(shape (1, 3))")) as info:
        bad.fit(x, y, epochs=1, verbose=0)
    assert "lin" in str(info.value) and "weight" in str(info.value)


@pytest.mark.backends("torch")
def test_torch_compile_routes_parameters_read_inside_f_to_grad_fn():
    # While torch.compile traces f there are no autograd nodes to walk, so a call whose f reaches
    # a tensor that requires grad runs eagerly (a graph break), where the walk finds it: the
    # parameter gets grad_fn's gradient, as in eager mode.
    w = torch.nn.Parameter(torch.tensor([2.0, 3.0], device=torch_device()))

    @customgrad.custom_gradient
    def f(x):
        return x * w, lambda dy, variables=None: (dy * 10.0, [dy * 5.0])

    x = torch.tensor([1.0, 2.0], requires_grad=True, device=torch_device())
    torch.compile(lambda x: f(x).sum())(x).backward()
    np.testing.assert_array_equal(npy(x.grad), [10.0, 10.0])
    np.testing.assert_array_equal(npy(w.grad), [5.0, 5.0])


# -- tf_variables=True: tensorflow's own variables for grad_fns written for tf.custom_gradient -----
# (what it passes is tested in test_tensorflow_gaps.py)

@pytest.mark.backends("jax", "torch")
def test_tf_variables_off_tensorflow_is_an_error_naming_the_function_and_the_backend():
    def scaled(x):
        return x, lambda dy: dy

    with pytest.raises(ValueError, match=re.escape(
            f"customgrad.custom_gradient: tf_variables=True (for `{scaled.__qualname__}`) "
            f"expects the tensorflow backend, whose grad_fn can receive the tf.Variables f read, "
            f"as tf.custom_gradient passes them; received the {BACKEND} backend")):
        customgrad.custom_gradient(scaled, tf_variables=True)
    with pytest.raises(ValueError, match="expects the tensorflow backend"):
        customgrad.custom_gradient(tf_variables=True)(scaled)
    assert customgrad.custom_gradient(scaled, tf_variables=False)(t([1.0])) is not None


def test_tf_variables_option_must_be_a_bool():
    with pytest.raises(TypeError, match=re.escape(
            "customgrad.custom_gradient: tf_variables must be True or False; received 'yes' "
            "(str).")):
        customgrad.custom_gradient(lambda x: (x, lambda dy: dy), tf_variables="yes")


# --- torch: tensors computed before f ran, read through an object (FSDP1's views) ----------------
class _Holder:
    """What FSDP1 (use_orig_params=True) makes of a module during its forward: `weight` is a
    view of one flat parameter, not a leaf. It also holds a module without a bias (a parameter
    registered as None), which the search for such views passes over."""

    def __init__(self, flat):
        self.weight = flat[:2]
        self.bias = flat[2:]
        self.no_bias = torch.nn.Linear(2, 2, bias=False, device=flat.device)


@pytest.mark.backends("torch")
@pytest.mark.parametrize("path", ["plain tensors", "keyword argument"])
def test_torch_view_of_a_flat_parameter_read_inside_f_passes_grad_fns_gradient_on(path):
    """The view gets grad_fn's gradient in `variables=`, and autograd sends it on to the flat
    parameter, as it would with plain ops: it used to be dropped silently (no error, no
    gradient) because only leaf tensors were looked for."""
    flat = torch.nn.Parameter(torch.tensor([2.0, 3.0, 0.5, 0.5], device=torch_device()))
    holder = _Holder(flat)
    x = torch.tensor([1.0, 2.0], requires_grad=True, device=torch_device())
    seen = {}

    @customgrad.custom_gradient
    def f(x, scale=1.0):
        def grad(dy, variables=None):
            seen["variables"] = variables
            return dy * 10.0, [dy * 100.0, dy * 1000.0]

        return (x * holder.weight + holder.bias) * scale, grad

    y = f(x) if path == "plain tensors" else f(x, scale=1.0)
    y.sum().backward()
    np.testing.assert_array_equal(npy(x.grad), [10.0, 10.0])
    np.testing.assert_array_equal(npy(flat.grad), [100.0, 100.0, 1000.0, 1000.0])
    assert seen["variables"][0] is holder.weight and seen["variables"][1] is holder.bias


@pytest.mark.backends("torch")
def test_torch_computed_tensor_customgrad_cannot_find_is_an_error_naming_its_op():
    flat = torch.nn.Parameter(torch.ones(4, device=torch_device()))
    # deeper than one container: no object f closes over holds it as an attribute or element
    hidden_deeper = {"weights": [flat[:2] * 3.0]}

    @customgrad.custom_gradient
    def f(x):
        return x * hidden_deeper["weights"][0], lambda dy, variables=None: (dy, [])

    with pytest.raises(CustomGradientError, match=re.escape(
            "computed before it ran, without receiving them as arguments (its outputs depend "
            "on them through MulBackward0)")):
        f(torch.ones(2, requires_grad=True, device=torch_device()))


@pytest.mark.backends("torch")
def test_torch_computed_tensor_in_a_list_f_closes_over_is_refused_as_on_every_backend():
    """A tensor computed from a parameter (no view of it, no module's weight) read through a
    list: refused by name, as jax and tensorflow refuse it (it used to get grad_fn's gradient
    in `variables=` one level deep, and a refusal deeper)."""
    flat = torch.nn.Parameter(torch.ones(4, device=torch_device()))
    weights = [flat[:2] * 3.0]

    @customgrad.custom_gradient
    def f(x):
        w = weights[0]
        return x * w, lambda dy, variables=None: (dy * w, [dy * x * 10.0])

    with pytest.raises(CustomGradientError, match=re.escape(
            "uses the tensor `weights[0]`, read through an object, which is being "
            "differentiated")):
        f(torch.tensor([1.0, 2.0], requires_grad=True, device=torch_device()))


@pytest.mark.backends("torch")
def test_torch_non_leaf_input_and_its_graph_are_not_hidden():
    """The input's own graph, made before f ran, is reached by the walk: not hidden."""
    p = torch.nn.Parameter(torch.tensor([2.0, 2.0], device=torch_device()))
    h = (p * 3.0)[:2]

    @customgrad.custom_gradient
    def f(x):
        return x.view(2) * 2.0, lambda dy: dy * 5.0

    f(h).sum().backward()
    np.testing.assert_array_equal(npy(p.grad), [15.0, 15.0])


@pytest.mark.backends("torch")
def test_torch_parameters_read_inside_f_arrive_in_the_order_f_used_them():
    """A linear layer's weight, then its bias (x @ W.T + b), as keras.Variables come in the
    order f read them: `weight, bias = variables` works."""
    lin = torch.nn.Linear(3, 2, device=torch_device())
    x = torch.ones(4, 3, requires_grad=True, device=torch_device())
    seen = {}

    @customgrad.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen["variables"] = variables
            weight, _ = variables
            return dy @ weight, [dy.T @ x, dy.sum(0)]

        return x @ lin.weight.T + lin.bias, grad

    f(x).sum().backward()
    assert seen["variables"][0] is lin.weight and seen["variables"][1] is lin.bias
    np.testing.assert_allclose(npy(lin.weight.grad), np.full((2, 3), 4.0))
