"""customgrad.patch_tensorflow(): `tf.custom_gradient`, as code written for TensorFlow reads it
(`tensorflow`, `tensorflow.compat.v1`, `tensorflow.compat.v2`), becomes customgrad's until
unpatch_tensorflow() puts back the very objects TensorFlow had; code written for it, such as
TensorFlow Probability's wrapper, then runs unchanged, and customgrad's own graphs (built on
TensorFlow's custom_gradient) do not recurse into the patch."""

import collections
import sys

import pytest
from helpers import BACKEND

import customgrad
from customgrad._patching import tf_custom_gradient

pytestmark = pytest.mark.autodiff


@pytest.fixture(autouse=True)
def never_leave_tensorflow_patched():
    yield
    if BACKEND == "tensorflow":
        customgrad.unpatch_tensorflow()


@pytest.mark.backends("jax", "torch")
def test_off_tensorflow_it_says_which_backend_it_needs():
    with pytest.raises(ValueError, match=rf"patch_tensorflow\(\) expects the tensorflow Keras "
                                         rf"backend.*received the {BACKEND} backend"):
        customgrad.patch_tensorflow()


def tensorflow_bindings():
    """module name -> its `custom_gradient`, for every loaded TensorFlow module that has one."""
    return {name: vars(module)["custom_gradient"] for name, module in list(sys.modules.items())
            if name.partition(".")[0] == "tensorflow" and module is not None
            and "custom_gradient" in vars(module)}


@pytest.mark.backends("tensorflow")
def test_patch_replaces_the_public_bindings_and_unpatch_puts_back_the_very_objects():
    import tensorflow as tf
    import tensorflow.compat.v1
    import tensorflow.compat.v2
    from tensorflow.python.ops import custom_gradient as internal

    original = tf.custom_gradient
    before = tensorflow_bindings()
    with customgrad.patch_tensorflow():
        patched = tensorflow_bindings()
        for module in (tf, tf.compat.v1, tf.compat.v2):
            assert module.custom_gradient is not original, module.__name__
        assert internal.custom_gradient is original  # TensorFlow's own uses keep its own
        changed = {name for name in patched if patched[name] is not before[name]}
        assert changed == {name for name, value in before.items() if value is original
                           and not name.startswith("tensorflow.python")}
        customgrad.patch_tensorflow()  # patching again while patched changes nothing
        assert tensorflow_bindings() == patched
    after = tensorflow_bindings()
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


@pytest.mark.backends("tensorflow")
def test_a_tf_custom_gradient_function_in_a_tf_function_does_not_recurse():
    """customgrad builds graphs on TensorFlow's custom_gradient: with the public name patched,
    the first and second derivatives in a tf.function are grad_fn's (as natively: 12 and 12)."""
    import tensorflow as tf

    with customgrad.patch_tensorflow():
        @tf.custom_gradient
        def cube(x):
            return x * x * x, lambda dy: dy * 3.0 * x * x

        @tf.function
        def first_and_second(x):
            with tf.GradientTape() as outer:
                outer.watch(x)
                (first,) = tf.gradients(cube(x), [x])
            return first, outer.gradient(first, x)

        first, second = first_and_second(tf.constant(2.0))
    assert (float(first), float(second)) == (12.0, 12.0)


@pytest.mark.backends("tensorflow")
def test_grad_fn_gets_the_tf_variables_f_read_as_tf_custom_gradient_passes_them():
    import tensorflow as tf

    scale = tf.Variable(3.0)
    seen = []
    with customgrad.patch_tensorflow():
        @tf.compat.v2.custom_gradient
        def scaled(x):
            def grad_fn(dy, variables=None):
                seen.extend(v.ref() for v in variables)
                return dy * scale, [tf.reduce_sum(dy * x)]
            return x * scale, grad_fn

        with tf.GradientTape() as tape:
            x = tf.constant(2.0)
            tape.watch(x)
            y = scaled(x)
        gx, gv = tape.gradient(y, [x, scale])
    assert seen == [scale.ref()]
    assert (float(gx), float(gv)) == (3.0, 2.0)


Results = collections.namedtuple("Results", ["value", "square"])


def _wrapped_like_tfp(bwd):
    """TensorFlow Probability's custom-gradient wrapper, in brief: grad_fn takes `*g, **kwargs`,
    packs `g` back into the output's structure and forwards `**kwargs` to `bwd`."""
    import tensorflow as tf

    @tf.custom_gradient
    def f(x):
        value = Results(x * 2.0, x * x)

        def vjp_bwd_wrapped(*g, **kwargs):
            return bwd(x, tf.nest.pack_sequence_as(value, g), **kwargs)

        return value, vjp_bwd_wrapped

    return f


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("in_function", [False, True], ids=["eager", "tf.function"])
def test_code_written_for_tf_custom_gradient_runs_unchanged(in_function):
    """A namedtuple output's `*g` holds one upstream per leaf, and `**kwargs` no `upstream=`."""
    import tensorflow as tf

    def bwd(x, g):  # takes no keyword: an upstream= would be a TypeError
        return g.value * 2.0 + g.square * 2.0 * x

    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = _wrapped_like_tfp(bwd)(x)
            loss = out.value * 5.0 + out.square * 7.0
        return tape.gradient(loss, x)

    def run(x):  # a new tf.function each time: it traces with the decorator then in place
        return (tf.function(gradient) if in_function else gradient)(x)

    native = run(tf.constant(3.0))
    with customgrad.patch_tensorflow():
        assert tf.custom_gradient is tf_custom_gradient
        patched = run(tf.constant(3.0))
    assert float(native) == float(patched) == 5.0 * 2.0 + 7.0 * 6.0
