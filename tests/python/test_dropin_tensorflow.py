"""TensorFlow's own custom-gradient tests, restated for `customgrad.custom_gradient`.

Each test checks, with TensorFlow's tools (GradientTape, tf.function, and the TF1 graph with
tf.gradients and a Session), the behaviour one of TensorFlow's tests checks for
`tf.custom_gradient` (named in the docstring): code written for `tf.custom_gradient` must run
unchanged once the decorator is swapped. TF1 graph variants are kept where TensorFlow's test runs
in a graph.
"""

import numpy as np
import pytest
from helpers import only_on

pytestmark = [only_on("tensorflow"), pytest.mark.autodiff]
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1

import customgrad  # noqa: E402
from customgrad import CustomGradientError  # noqa: E402

MODES = ["eager", "tf1_graph"]


def evaluate(mode, build):
    """Runs `build()` (returning tensors, or a structure of them) eagerly, or in a fresh TF1
    graph with its variables initialized, and returns numpy values."""
    if mode == "eager":
        return tf.nest.map_structure(lambda t: None if t is None else np.asarray(t), build())
    graph = tf.Graph()
    with graph.as_default():
        fetches = build()
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            return session.run(fetches)


def tape_gradient(target, sources, persistent=False):
    """Gradient of `target()` with respect to `sources` under a GradientTape."""
    with tf.GradientTape(persistent=persistent) as tape:
        tape.watch(sources)
        y = target()
    return tape.gradient(y, sources)


def graph_or_tape_gradient(mode, target, sources):
    """tf.gradients in a TF1 graph, a GradientTape eagerly: each mode's own tool."""
    if mode == "tf1_graph":
        return tf.gradients(target(), sources)
    return tape_gradient(target, sources)


# --- gradients_test.py, CustomGradientTest -------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_identity_with_tripled_gradient_applied_twice_gives_nine(mode):
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientTrivial."""

    @customgrad.custom_gradient
    def tripling_identity(x):
        def grad(dy):
            return [3 * dy]

        return x, grad

    def build():
        x = tf.constant(3.0)
        return graph_or_tape_gradient(mode, lambda: tripling_identity(tripling_identity(x)), [x])

    (dx,) = evaluate(mode, build)
    assert dx == 9.0


@pytest.mark.parametrize("mode", MODES)
def test_product_whose_grad_fn_swaps_the_partials_gets_the_swapped_values(mode):
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradient."""

    @customgrad.custom_gradient
    def swapped_product(x1, x2):
        def grad(dy):
            return [dy * x1, dy * x2]  # deliberately swapped: shows grad_fn is what runs

        return x1 * x2, grad

    def build():
        x1, x2 = tf.constant(3.0), tf.constant(5.0)
        return graph_or_tape_gradient(mode, lambda: swapped_product(x1, x2), [x1, x2])

    np.testing.assert_array_equal(evaluate(mode, build), [3.0, 5.0])


@pytest.mark.parametrize("mode", MODES)
def test_decorated_method_gets_gradients_for_its_tensor_arguments_not_for_self(mode):
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientClass."""

    class Model:
        @customgrad.custom_gradient
        def multiply(self, x1, x2):
            return x1 * x2, lambda dy: (dy * x1, dy * x2)

    def build():
        x1, x2 = tf.constant(3.0), tf.constant(5.0)
        model = Model()
        return graph_or_tape_gradient(mode, lambda: model.multiply(x1, x2), [x1, x2])

    np.testing.assert_array_equal(evaluate(mode, build), [3.0, 5.0])


@pytest.mark.parametrize("mode", MODES)
def test_exception_raised_by_grad_fn_reaches_the_caller_unchanged(mode):
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientErrors (and
    backprop_test.py BackpropTest.testErrors): grad_fn's own error is not swallowed."""

    @customgrad.custom_gradient
    def failing_backward(x):
        def grad(_):
            raise RuntimeError("grad_fn failed on purpose")

        return x, grad

    def build():
        x = tf.constant(1.0)
        return graph_or_tape_gradient(mode, lambda: failing_backward(x), [x])

    with pytest.raises(RuntimeError, match="grad_fn failed on purpose"):
        evaluate(mode, build)


def _dense_in_scope(x, units, name="dense"):
    """`x @ w` for a resource variable `w` made in the current variable scope (what
    tf.compat.v1.layers.dense(use_bias=False) does; that layer needs Keras 2)."""
    w = v1.get_variable(name, shape=(x.shape[-1], units), use_resource=True)
    return tf.matmul(x, w)


def test_variable_created_inside_f_in_a_tf1_graph_gets_grad_fn_gradient():
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientWithVariables."""
    seen = {}

    @customgrad.custom_gradient
    def project(x):
        out = _dense_in_scope(x, 3)

        def grad(out_grad, variables=None):
            seen["n_variables"] = len(variables)
            grads = tf.gradients(out, [x, variables[0]], grad_ys=out_grad)
            return grads[0], [tf.ones((4, 3))]

        return out, grad

    graph = tf.Graph()
    with graph.as_default():
        x = tf.ones((2, 4))
        with v1.variable_scope("f", use_resource=True) as scope:
            y = project(x)
            all_vars = scope.global_variables()
        assert len(all_vars) == 1
        grads = tf.gradients(y, [x, all_vars[0]])
        assert all(g is not None for g in grads)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            assert session.run(tf.reduce_sum(grads[1])) == 12.0
    assert seen["n_variables"] == 1


def test_variables_created_before_f_are_not_handed_to_its_grad_fn():
    """TensorFlow: gradients_test.py
    CustomGradientTest.testCustomGradientWithVariablesNoFalsePositives."""
    seen = {}

    @customgrad.custom_gradient
    def project(x):
        out = _dense_in_scope(x, 3, name="inside_f")

        def grad(out_grad, variables=None):
            seen["n_variables"] = len(variables)
            grads = tf.gradients(out, [x, variables[0]], grad_ys=out_grad)
            return grads[0], [tf.ones((3, 3))]

        return out, grad

    graph = tf.Graph()
    with graph.as_default():
        with v1.variable_scope("f", use_resource=True) as scope:
            a = tf.ones((2, 4))
            b = _dense_in_scope(a, 3, name="b")
            c = _dense_in_scope(b, 3, name="c")
            x = _dense_in_scope(b, 3, name="d") + c
            y = project(x)
            all_vars = scope.global_variables()
        assert len(all_vars) == 4
        grads = tf.gradients(y, [x] + all_vars)
        assert all(g is not None for g in grads)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            assert session.run(tf.reduce_sum(grads[-1])) == 9.0
    assert seen["n_variables"] == 1


class _TFDense(tf.Module):
    """A dense layer without bias whose kernel is a plain tf.Variable (TensorFlow's own layers'
    variables, not Keras's)."""

    def __init__(self, units):
        super().__init__()
        self.units = units
        self.kernel = None

    def __call__(self, x):
        if self.kernel is None:
            self.kernel = tf.Variable(tf.ones((x.shape[-1], self.units)), name="kernel")
        return tf.matmul(x, self.kernel)


@pytest.mark.parametrize("layer_kind", ["tf_module", "keras_dense"])
def test_layer_variables_read_inside_f_eagerly_get_grad_fn_gradients(layer_kind):
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientWithVariablesEager
    (TensorFlow's layer holds tf.Variables; the keras_dense case runs the same with a Keras 3
    Dense layer)."""
    import keras

    layer = _TFDense(4) if layer_kind == "tf_module" else keras.layers.Dense(4, use_bias=False)
    seen = {}

    @customgrad.custom_gradient
    def apply_layer(x):
        out = layer(x)

        def grad(out_grad, variables=None):
            seen["n_variables"] = len(variables)
            return tf.ones((3, 2)), [tf.ones((2, 4))]

        return out, grad

    x = tf.ones((3, 2)) + 2.0
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = apply_layer(x)
    (w,) = [v.value if isinstance(v, keras.Variable) else v for v in layer.variables]
    dx, dw = tape.gradient(y, [x, w])
    assert seen["n_variables"] == 1
    assert float(tf.reduce_sum(dx)) == 6.0
    assert float(tf.reduce_sum(dw)) == 8.0


def test_non_resource_variable_read_inside_f_in_a_tf1_graph_is_a_clear_error():
    """TensorFlow: gradients_test.py
    CustomGradientTest.testCustomGradientErrorsWithNonResourceVariables: a reference
    (non-resource) variable inside f is refused at the call, naming the function; a resource
    variable in the same place is accepted."""

    def body(x, use_resource):
        with v1.variable_scope("f", use_resource=use_resource):
            out = _dense_ref_or_resource(x, 4, use_resource)

        def grad(out_grad, variables=None):
            return tf.ones((3, 2)), [tf.ones((2, 4))]

        return out, grad

    @customgrad.custom_gradient
    def with_resource_variable(x):
        return body(x, use_resource=True)

    @customgrad.custom_gradient
    def with_reference_variable(x):
        return body(x, use_resource=False)

    graph = tf.Graph()
    with graph.as_default():
        x = tf.ones((3, 2)) + 2.0
        with v1.variable_scope("vs1", use_resource=True):
            with pytest.raises(CustomGradientError, match="with_reference_variable"):
                with_reference_variable(x)
        with v1.variable_scope("vs2", use_resource=False):
            y = with_resource_variable(x)
        assert tuple(y.shape) == (3, 4)


def _dense_ref_or_resource(x, units, use_resource):
    w = v1.get_variable("kernel", shape=(x.shape[-1], units), use_resource=use_resource)
    return tf.matmul(x, w)


def test_numpy_array_argument_is_accepted_and_passed_through():
    """TensorFlow: gradients_test.py CustomGradientTest.testWithNumpyInputs."""

    @customgrad.custom_gradient
    def passthrough(x):
        def grad(_):
            return (None, None)

        return x, grad

    x = np.ones((3, 2), dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(passthrough(x)), x)


def test_custom_gradients_in_the_branches_of_a_graph_cond_follow_the_predicate():
    """TensorFlow: gradients_test.py CustomGradientTest.testRVGradientsDynamicCond (a resource
    variable differentiated through a tf.cond whose predicate is fed at run time; here each
    branch is a custom-gradient function)."""

    @customgrad.custom_gradient
    def times_two(a):
        return a * 2.0, lambda dy: dy * 2.0

    @customgrad.custom_gradient
    def times_three(a):
        return a * 3.0, lambda dy: dy * 3.0

    graph = tf.Graph()
    with graph.as_default():
        alpha = v1.get_variable("alpha", initializer=tf.constant([0.5]), use_resource=True)
        take_first = v1.placeholder_with_default(True, shape=())
        output = tf.cond(take_first, lambda: times_two(alpha), lambda: times_three(alpha))
        (g,) = tf.gradients(output, alpha)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            np.testing.assert_array_equal(session.run(g), [2.0])
            np.testing.assert_array_equal(session.run(g, feed_dict={take_first: False}), [3.0])


def test_custom_gradient_calling_another_both_with_variables_in_a_tf1_graph():
    """TensorFlow: gradients_test.py CustomGradientTest.testRecursiveCustomGradient."""

    @customgrad.custom_gradient
    def inner(x):
        out = _dense_in_scope(x, 3)

        def grad(out_grad, variables=None):
            assert len(variables) == 1
            grads = tf.gradients(out, [x, variables[0]], grad_ys=out_grad)
            return grads[0], [tf.ones((4, 3))]

        return out, grad

    @customgrad.custom_gradient
    def outer(x):
        out = inner(x)

        def grad(out_grad, variables=None):
            assert len(variables) == 1
            grads = tf.gradients(out, [x, variables[0]], grad_ys=out_grad)
            return grads[0], [tf.ones((4, 3))]

        return out, grad

    graph = tf.Graph()
    with graph.as_default():
        x = tf.ones((2, 4))
        with v1.variable_scope("f", use_resource=True) as scope:
            y = outer(x)
            all_vars = scope.global_variables()
        assert len(all_vars) == 1
        grads = tf.gradients(y, [x, all_vars[0]])
        assert all(g is not None for g in grads)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            assert session.run(tf.reduce_sum(grads[1])) == 12.0


@pytest.mark.parametrize("anonymous_varargs", [True, False], ids=["dy_kwonly", "star_dys"])
def test_keyword_only_variables_parameter_receives_the_captured_variable(anonymous_varargs):
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientWithVariablesKwonlyArgs
    (anonymous_varargs True/False)."""
    x_captured = tf.Variable(3.0)

    @customgrad.custom_gradient
    def scaled(x):
        def actual_grad(dy, variables):
            assert len(variables) == 1
            assert variables[0] is x_captured
            return 4.0 * x_captured * dy, [5.0 * x * dy]

        if anonymous_varargs:
            def grad(dy, *, variables=None):
                return actual_grad(dy, variables)
        else:
            def grad(*dys, variables=None):
                return actual_grad(dys[0], variables)

        return x * x_captured, grad

    x = tf.Variable(6.0)
    with tf.GradientTape(persistent=True) as tape:
        y = scaled(x)
    assert float(tape.gradient(y, x)) == 4.0 * 3.0
    assert float(tape.gradient(y, x_captured)) == 5.0 * 6.0


def test_captured_tensor_inside_a_tf_function_gets_no_gradient_and_the_argument_gets_grad_fn():
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientWithCapture (a Defun
    there, a tf.function here): x is captured from outside the function, the gradient is taken
    with respect to the argument y only."""

    @customgrad.custom_gradient
    def swapped_product(x1, x2):
        def grad(dy):
            return [dy * x1, dy * x2]

        return x1 * x2, grad

    x = tf.constant(3.0)

    @tf.function
    def gradient_wrt_y(y):
        with tf.GradientTape() as tape:
            tape.watch(y)
            res = swapped_product(x, y)
        return tape.gradient(res, [y])

    (dy,) = gradient_wrt_y(tf.constant(5.0))
    assert float(dy) == 5.0


def test_captured_tensor_in_a_tf1_graph_function_with_tf_gradients_inside():
    """TensorFlow: gradients_test.py CustomGradientTest.testCustomGradientWithCapture, in its
    own setting: a TF1 graph, the function built in it, tf.gradients inside the function."""

    @customgrad.custom_gradient
    def swapped_product(x1, x2):
        def grad(dy):
            return [dy * x1, dy * x2]

        return x1 * x2, grad

    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(3.0)

        @tf.function
        def gradient_wrt_y(y):
            return tf.gradients(swapped_product(x, y), [y])

        dy = gradient_wrt_y(tf.constant(5.0))
        with v1.Session(graph=graph) as session:
            np.testing.assert_array_equal(session.run(dy), [5.0])


# --- backprop_test.py ----------------------------------------------------------------------------
def test_grad_fn_returning_an_empty_list_for_one_input_is_a_clear_error():
    """TensorFlow: backprop_test.py BackpropTest.testCustomGradientEmptyError."""

    @customgrad.custom_gradient
    def identity_with_wrong_grad(x):
        def grad(_):
            return []  # wrong: one gradient is needed

        return x, grad

    x = tf.Variable(1.0)
    with tf.GradientTape() as tape:
        y = identity_with_wrong_grad(x)
    with pytest.raises(CustomGradientError, match="identity_with_wrong_grad"):
        tape.gradient(y, [x])


def test_f_may_take_a_gradient_of_its_own_with_a_tape_on_a_python_float_argument():
    """TensorFlow: backprop_test.py BackpropTest.testGradientsFunctionInCustomGradient (f is
    called on the Python float 1.0; tf.custom_gradient hands f a tensor)."""

    @customgrad.custom_gradient
    def derivative_of_square(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            square = x * x
        y = tape.gradient(square, x)

        def grad(dy):
            return [2 * dy]

        return y, grad

    assert float(derivative_of_square(1.0)) == 2.0


def test_variable_argument_gets_grad_fn_gradient_from_an_implicit_variable_tape():
    """TensorFlow: backprop_test.py
    BackpropTest.testImplicitGradientsCustomGradientAndCachedVariableValue."""

    @customgrad.custom_gradient
    def square_plus_one_grad(x):
        def grad(dr):
            return 2 * dr * x + 1

        return tf.square(x), grad

    x = tf.Variable(3.0, name="X")
    with tf.GradientTape() as tape:  # watches trainable variables as they are read
        y = square_plus_one_grad(x)
    assert [v.ref() for v in tape.watched_variables()] == [x.ref()]
    assert float(tape.gradient(y, x)) == 7.0


class _Quadratic:
    def __init__(self):
        self.a = tf.Variable(1.0)
        self.b = tf.Variable(2.0)
        self.c = tf.Variable(3.0)

    def __call__(self, x):
        return self.a * x * x + self.b * x + self.c


def _no_argument_custom_call(c, x):
    """A custom-gradient function of no arguments that reads c's variables, inside a
    tf.function; grad_fn returns twice the variables' jacobians (summed against dy)."""

    @tf.function
    def call(c, x):
        @customgrad.custom_gradient
        def _call():
            y = c(x)

            def grad(dy, variables=None):
                with tf.GradientTape(persistent=True) as g:
                    g.watch(variables)
                    y = c(x)
                grad_vars = [2 * tf.reduce_sum(dy * g.jacobian(y, v)) for v in variables]
                del g
                return (), grad_vars

            return y, grad

        return _call()

    return call(c, x)


def test_no_argument_function_inside_tf_function_gives_no_gradient_to_an_unwatched_tensor():
    """TensorFlow: backprop_test.py BackpropTest.testJacobianCustomGradient."""
    c = _Quadratic()
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch([c.a, c.b, c.c])
        y = _no_argument_custom_call(c, x)
    assert g.gradient(y, x) is None


def test_no_argument_function_inside_tf_function_gives_the_variables_grad_fn_gradients():
    """TensorFlow: backprop_test.py BackpropTest.testJacobianCustomGradient (the variables'
    gradients, which TensorFlow's test computes but does not check: 2 * sum(jacobian))."""
    c = _Quadratic()
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch([c.a, c.b, c.c])
        y = _no_argument_custom_call(c, x)
    grads = g.gradient(y, [c.a, c.b, c.c])
    np.testing.assert_allclose([float(v) for v in grads], [28.0, 12.0, 6.0])


def test_training_loop_with_a_python_float_first_argument_descends_as_grad_fn_says():
    """TensorFlow: backprop_test.py BackpropTest.testCustomGradient."""

    @customgrad.custom_gradient
    def swapped_mul(x, y):
        def grad(dr):
            return [dr * y, dr * x]

        return x * y, grad

    lr = 0.25
    x = tf.Variable(2.0, name="x")
    losses = []
    for _ in range(5):
        with tf.GradientTape() as tape:
            loss = swapped_mul(2.0, x.read_value())
        (g,) = tape.gradient(loss, [x])
        losses.append(float(loss))
        x.assign_sub(lr * g)
    assert losses == [4.0, 3.0, 2.0, 1.0, 0.0]


def test_identity_with_doubled_gradient_on_a_python_float():
    """TensorFlow: backprop_test.py BackpropTest.testCustomGradientIdentity (there through
    backprop.gradients_function, here through customgrad.grad)."""

    @customgrad.custom_gradient
    def doubling_identity(x):
        def grad(dresult):
            return [2 * dresult]

        return x, grad

    assert float(customgrad.grad(doubling_identity)(1.0)) == 2.0


@pytest.mark.parametrize("mode", MODES)
def test_square_with_gradient_four_under_a_tape_eagerly_and_in_a_tf1_graph(mode):
    """TensorFlow: backprop_test.py BackpropTest.testCustomGradientInEagerAndGraph."""

    @customgrad.custom_gradient
    def square(x):
        return x * x, lambda dy: [4 * dy]

    def build():
        with tf.GradientTape() as t:
            c = tf.constant(1.0)
            t.watch(c)
            g = square(c)
        return t.gradient(g, c)

    assert evaluate(mode, build) == 4.0


def test_grad_fn_calling_a_custom_gradient_with_a_python_float_output_sets_second_order():
    """TensorFlow: backprop_test.py BackpropTest.testOverrideSecondOrderWithCustomGradient (the
    inner function returns the Python float -1.1 as its output)."""

    @customgrad.custom_gradient
    def shifted(x):
        def first_order_grad(dz):
            @customgrad.custom_gradient
            def first_order_custom(unused_x):
                def h(ddz):
                    return -2.1 * ddz

                return -1.1, h

            return dz * first_order_custom(x)

        return x + 10.0, first_order_grad

    c = tf.constant(1.0)
    with tf.GradientTape() as outer:
        outer.watch(c)
        with tf.GradientTape() as inner:
            inner.watch(c)
            d = shifted(c) ** 4.0
        dd = inner.gradient(d, c)
        np.testing.assert_allclose(float(dd), float(4.0 * shifted(c) ** 3.0 * -1.1), rtol=1e-6)
    f = float(shifted(c))
    expected = 3.0 * 4.0 * f ** 2.0 * -1.1 * -1.1 + 4.0 * f ** 3.0 * -2.1
    np.testing.assert_allclose(float(outer.gradient(dd, c)), expected, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_numpy_valued_forward_and_python_float_outputs_give_set_first_second_order_and_transpose(mode):
    """TensorFlow: backprop_test.py BackpropTest.testCustomGradientForwardprop: f's output is a
    numpy value (2 * the input's static value); its grad_fn calls a two-argument custom-gradient
    function whose output (2.1) and gradients (2.2, 3.1) are Python floats."""

    @customgrad.custom_gradient
    def doubled_static(x):
        z = 2.0 * tf.get_static_value(x)

        def g(dz):
            @customgrad.custom_gradient
            def first_order(unused_x, unused_dz):
                def second_order_and_transpose(unused_ddz):
                    return 2.2, 3.1

                return 2.1, second_order_and_transpose

            return first_order(x, dz)

        return z, g

    def build():
        with tf.GradientTape(persistent=True) as t:
            with tf.GradientTape() as tt:
                c = tf.constant(1.0)
                t.watch(c)
                tt.watch(c)
                output_grad = tf.ones([])
                t.watch(output_grad)
                output = doubled_static(c)
            gc = tt.gradient(output, c, output_gradients=output_grad)
        ggc = t.gradient(gc, c)
        transpose = t.gradient(gc, output_grad)
        return output, gc, ggc, transpose

    output, gc, ggc, transpose = evaluate(mode, build)
    np.testing.assert_allclose([output, gc, ggc, transpose], [2.0, 2.1, 2.2, 3.1], rtol=1e-6)
