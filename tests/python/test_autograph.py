"""AutoGraph and customgrad (tensorflow): a user's `tf.function` converts none of customgrad's own
functions, whichever way it reaches them (a tape over a decorated function, `customgrad.grad`,
`vjp`, `jvp`, `value_and_grad`, `remat`, `customgrad.ops`), prints no AutoGraph warning, and
runs the user's f and grad_fn unconverted, as it runs `tf.custom_gradient`'s (a Python `if` on a
tensor inside them raises the same error under both). See python/customgrad/_autograph.py."""

import logging
from pathlib import Path

import keras
import pytest
from helpers import BACKEND

import customgrad

pytestmark = [pytest.mark.backends("tensorflow"), pytest.mark.autodiff]

if BACKEND == "tensorflow":
    import tensorflow as tf

PACKAGE = Path(customgrad.__file__).resolve().parent


def _swish_from(decorator):
    @decorator
    def swish(x):
        s = keras.ops.sigmoid(x)
        return x * s, lambda dy: dy * (s * (1.0 + x * (1.0 - s)))

    return swish


def _is_customgrad_code(entity):
    """Whether `entity` is customgrad's own: by its module or by the file of its code (the
    decorated function carries f's `__module__`, copied by functools.wraps)."""
    function = getattr(entity, "__func__", entity)
    code = getattr(function, "__code__", None)
    in_package = code is not None and Path(code.co_filename).resolve().is_relative_to(PACKAGE)
    return in_package or str(getattr(function, "__module__", "")).startswith("customgrad")


@pytest.fixture
def conversions(monkeypatch):
    """The functions AutoGraph converts while the test runs, in order: every conversion goes
    through `api._convert_actual` (converted_call and tf.function's own entry, TF 2.2 to 2.21),
    which looks it up as a module global, so wrapping it sees each one."""
    from tensorflow.python.autograph.impl import api

    if not hasattr(api, "_convert_actual"):
        pytest.fail("tensorflow.python.autograph.impl.api._convert_actual is gone in tensorflow "
                    f"{tf.__version__}: this test needs another way to see AutoGraph convert")
    seen = []
    original = api._convert_actual

    def recording(entity, program_ctx):
        seen.append(entity)
        return original(entity, program_ctx)

    monkeypatch.setattr(api, "_convert_actual", recording)
    return seen


def _tape_step(depth):
    swish = _swish_from(customgrad.custom_gradient)

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x
            for _ in range(depth):
                y = swish(y)
            loss = tf.reduce_sum(customgrad.ops.log1pexp(y))
        return tape.gradient(loss, x)

    return step


def _loss(x):
    return keras.ops.sum(_swish_from(customgrad.custom_gradient)(x))


def _vjp_step(x):
    out, vjp_fn = customgrad.vjp(_loss, x)
    return vjp_fn(tf.ones_like(out))


def _jvp_step(x):
    return customgrad.jvp(_loss, (x,), (tf.ones_like(x),))


STEPS = {
    "tape over a decorated function, depth 1": lambda: _tape_step(1),
    "tape over a decorated function, depth 3": lambda: _tape_step(3),
    "customgrad.grad": lambda: customgrad.grad(_loss),
    "customgrad.value_and_grad": lambda: customgrad.value_and_grad(_loss),
    "customgrad.grad of customgrad.remat": lambda: customgrad.grad(customgrad.remat(_loss)),
    "customgrad.vjp inside": lambda: _vjp_step,
    "customgrad.jvp inside": lambda: _jvp_step,
    "the decorated function itself": lambda: _swish_from(customgrad.custom_gradient),
}


@pytest.mark.parametrize("name", list(STEPS))
def test_a_trace_converts_no_customgrad_function(name, conversions):
    step = STEPS[name]()
    tf.function(step).get_concrete_function(tf.TensorSpec([4], tf.float32))
    converted = [f"{getattr(e, '__qualname__', e)} ({getattr(e, '__code__', None)})"
                 for e in conversions if _is_customgrad_code(e)]
    assert not converted, f"AutoGraph converted customgrad's {converted}"
    # the observation works: the user's own step is converted where it is the user's code
    if not name.startswith(("customgrad.grad", "customgrad.value_and_grad", "the decorated")):
        assert any(getattr(e, "__code__", None) is step.__code__ for e in conversions), conversions


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _log1pexp(x):
    e = keras.ops.exp(x)
    return keras.ops.log(1.0 + e), lambda dy: dy * (1.0 - 1.0 / (1.0 + e))


# the getting-started page's loss, a module-level lambda over a global (AutoGraph failed to parse
# this one: "no matching AST found among candidates")
_page_loss = lambda x: keras.ops.sum(_log1pexp_decorated(x))  # noqa: E731
_log1pexp_decorated = None  # decorated in the test, on its backend


@pytest.mark.parametrize("with_customgrad", [False, True])
def test_tf_function_of_grad_of_a_lambda_prints_no_autograph_warning(
        with_customgrad, capsys, monkeypatch):
    """The getting-started page's compilation block: AutoGraph's "could not transform <lambda>"
    warning goes to the `tensorflow` logger (and to stdout where AutoGraph echoes its log); the
    native form, a tape over the same lambda (and tf.custom_gradient), prints none either."""
    decorator = customgrad.custom_gradient if with_customgrad else tf.custom_gradient
    monkeypatch.setitem(globals(), "_log1pexp_decorated", decorator(_log1pexp))

    def native_grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = _page_loss(x)
        return tape.gradient(value, x)

    handler = _Warnings()
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        step = tf.function(customgrad.grad(_page_loss) if with_customgrad else native_grad,
                           jit_compile=True)
        step.get_concrete_function(tf.TensorSpec([2], tf.float32))
    finally:
        logger.removeHandler(handler)
    printed = capsys.readouterr()
    autograph = [m for m in handler.messages + [printed.out, printed.err]
                 if "AutoGraph" in m or "could not transform" in m]
    assert not autograph, autograph


def _branchy_f(decorator):
    @decorator
    def branchy(x):
        if x > 0:  # a Python `if` on a tensor: AutoGraph would make it a tf.cond
            y = x * 2.0
        else:
            y = x * 3.0
        return y, lambda dy: dy * 5.0

    return branchy


def _branchy_grad_fn(decorator):
    @decorator
    def branchy(x):
        def grad_fn(dy):
            if dy > 0:
                return dy * 5.0
            return dy * 7.0

        return x * 2.0, grad_fn

    return branchy


def _outcome(run):
    try:
        return ("returns", float(run()))
    except Exception as error:  # what natively happens is the expectation, whatever it is
        return ("raises", type(error).__name__)


def _ways(branchy):
    def called_inside(x):
        return branchy(x)

    def tape_inside(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = branchy(x)
        return tape.gradient(y, x)

    return {"tf.function of it": tf.function(branchy),
            "called inside a tf.function": tf.function(called_inside),
            "a tape over it inside a tf.function": tf.function(tape_inside)}


@pytest.mark.parametrize("where", ["f", "grad_fn"])
def test_python_control_flow_on_a_tensor_inside_f_and_grad_fn_fares_as_under_tf_custom_gradient(
        where):
    """Neither is converted by AutoGraph, natively or with customgrad: the `if` raises
    OperatorNotAllowedInGraphError in both (as it runs eagerly in both)."""
    make = _branchy_f if where == "f" else _branchy_grad_fn
    native = _ways(make(tf.custom_gradient))
    ours = _ways(make(customgrad.custom_gradient))
    x = tf.constant(1.0)
    outcomes = {way: (_outcome(lambda: native[way](x)), _outcome(lambda: ours[way](x)))
                for way in native}
    assert all(n == o for n, o in outcomes.values()), outcomes
    if where == "f":  # what the expectation is, today: the `if` is not converted
        assert all(n == ("raises", "OperatorNotAllowedInGraphError")
                   for n, _ in outcomes.values()), outcomes


def test_the_marks_cost_nothing_on_a_call():
    """The decorated function is marked once, at decoration, with the attribute AutoGraph reads
    (no wrapper around it), and customgrad's module is in AutoGraph's DoNotConvert rules."""
    from tensorflow.python.autograph.core import config
    from tensorflow.python.autograph.impl import api

    swish = _swish_from(customgrad.custom_gradient)
    assert api.is_autograph_artifact(swish)
    assert swish.__wrapped__.__name__ == "swish"
    assert api.is_autograph_artifact(customgrad.grad(_loss))
    assert sum(isinstance(r, config.DoNotConvert) and r.matches("customgrad.ops")
               for r in config.CONVERSION_RULES) >= 1
    customgrad._autograph.keep_autograph_off_customgrad()  # idempotent
    assert [r.matches("customgrad") for r in config.CONVERSION_RULES].count(True) == 1
