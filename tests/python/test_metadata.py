"""Package metadata: one version (python/customgrad/__init__.py) that the R package and the
installed distribution repeat, one licence, and the error class under its public name; and the
decorated function's metadata: f's, as `functools.wraps` and (on tensorflow) `tf.custom_gradient`
give it, for code that introspects a custom-gradient function (GPflow, TFP)."""

import importlib.metadata
import importlib.util
import inspect
import re
from pathlib import Path

import keras
import pytest
from helpers import t

import customgrad

ROOT = Path(__file__).resolve().parents[2]


def test_one_version_everywhere():
    description = (ROOT / "DESCRIPTION").read_text()
    (r_version,) = re.findall(r"^Version:\s*(\S+)$", description, flags=re.M)
    assert r_version == customgrad.__version__
    try:
        installed = importlib.metadata.version("customgrad")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("customgrad runs from its sources here (PYTHONPATH), not installed")
    assert installed == customgrad.__version__


def test_the_licence_the_metadata_names_is_there():
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "Apache License (== 2.0)" in (ROOT / "DESCRIPTION").read_text()


def test_custom_gradient_error_prints_under_its_public_name():
    import traceback

    text = traceback.format_exception_only(customgrad.CustomGradientError("why"))
    assert text == ["customgrad.CustomGradientError: why\n"]


def _scaled(x, y=2.0, *, offset=0.0):
    """x * y + offset, with y and offset constants (a Python float x is one, too)."""
    return x * y + offset, lambda dy: dy * y


def test_the_decorated_function_carries_fs_name_doc_and_module():
    decorated = customgrad.custom_gradient(_scaled)
    assert decorated.__name__ == "_scaled"
    assert decorated.__qualname__ == "_scaled"
    assert decorated.__module__ == __name__
    assert decorated.__doc__ == _scaled.__doc__
    assert decorated.__wrapped__ is _scaled


def test_the_decorated_function_keeps_f_as_its_original_wrapped():
    # tf_decorator.make_decorator's second handle on f, which GPflow calls; on every backend
    decorated = customgrad.custom_gradient(_scaled)
    assert decorated.__original_wrapped__ is _scaled
    output, grad_fn = decorated.__original_wrapped__(3.0)  # f itself: the pair
    assert output == 6.0 and callable(grad_fn)


def test_the_decorated_functions_signature_is_fs():
    decorated = customgrad.custom_gradient(_scaled)
    assert inspect.signature(decorated) == inspect.signature(_scaled)
    # a method decorated at class definition: bound, it loses `self` as f's would
    class Model:
        @customgrad.custom_gradient
        def call(self, x):
            return x, lambda dy: dy

    assert list(inspect.signature(Model().call).parameters) == ["x"]


@pytest.mark.backends("tensorflow")
def test_tf_inspect_reads_fs_argument_spec_off_the_decorated_function():
    # getfullargspec does not follow __wrapped__: it read (*args, **kwargs) before
    from tensorflow.python.util import tf_inspect

    decorated = customgrad.custom_gradient(_scaled)
    assert tf_inspect.getfullargspec(decorated) == tf_inspect.getfullargspec(_scaled)
    assert inspect.getfullargspec(decorated) == inspect.getfullargspec(_scaled)

    def no_arguments():
        return 1.0, lambda dy: ()

    assert tf_inspect.getfullargspec(customgrad.custom_gradient(no_arguments)).args == []


@pytest.mark.backends("tensorflow")
def test_tf_function_of_the_decorated_function_leaves_its_metadata_alone():
    # customgrad sets no `_tf_decorator`: with one, tf.function would convert f into a function
    # it never calls and rewrap it. AutoGraph runs f unconverted, as it does tf.custom_gradient's
    # (test_autograph.py)
    import tensorflow as tf

    @customgrad.custom_gradient
    def doubled(x):
        return x * 2.0, lambda dy: dy * 5.0

    compiled = tf.function(doubled)
    assert float(compiled(tf.constant(1.0))) == 2.0
    assert doubled.__wrapped__ is doubled.__original_wrapped__  # tf.function changed neither
    assert not hasattr(doubled, "_tf_decorator")


def _zero_argument_loss(variable):
    """A custom-gradient function of no arguments reading `variable` (its value squared)."""

    @customgrad.custom_gradient
    def loss():
        value = variable.value if isinstance(variable, keras.Variable) else variable

        def grad(dy, variables=None):
            return [], [dy * 2.0 * value for _ in variables]

        return value * value, grad

    return loss


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("kind", ["tf_variable", "keras_variable"])
def test_a_zero_argument_function_of_variables_is_called_with_none_as_its_spec_says(kind):
    # tfp.math.value_and_gradient's rule (its _has_args), restated: f is called with the
    # arguments only if tf_inspect finds f has parameters
    import tensorflow as tf
    from tensorflow.python.util import tf_inspect

    variable = tf.Variable(3.0) if kind == "tf_variable" else keras.Variable(3.0)
    loss = _zero_argument_loss(variable)
    spec = tf_inspect.getfullargspec(loss)
    takes_arguments = bool(spec.args or spec.kwonlyargs or spec.varargs or spec.varkw)
    assert not takes_arguments
    watched = variable.value if kind == "keras_variable" else variable
    with tf.GradientTape() as tape:
        value = loss(watched) if takes_arguments else loss()
    assert float(value) == 9.0
    assert float(tape.gradient(value, watched)) == 6.0


@pytest.mark.backends("tensorflow")
def test_tfp_value_and_gradient_of_a_zero_argument_custom_gradient_function():
    if importlib.util.find_spec("tensorflow_probability") is None:
        pytest.skip("tensorflow_probability is not installed here")
    import tensorflow as tf
    import tensorflow_probability as tfp

    variable = tf.Variable(3.0)
    value, gradient = tfp.math.value_and_gradient(_zero_argument_loss(variable), variable)
    assert (float(value), float(gradient)) == (9.0, 6.0)  # tf.custom_gradient's too


@pytest.mark.autodiff
def test_the_decorated_function_still_differentiates_with_its_metadata():
    decorated = customgrad.custom_gradient(_scaled)
    assert float(customgrad.grad(decorated)(t(3.0))) == 2.0
