"""The core's half and the backend's half of one call: `_call.run_reading` records what f reads
(the one recording site; each backend's `watching_reads` adds its own watcher), and a
`_call.Link` says which of grad_fn's gradients go where."""

import keras
import numpy as np
import pytest
from helpers import BACKEND, npy, t

import customgrad
from customgrad import _call, _core

pytestmark = pytest.mark.autodiff


def _two_outputs(x, y):
    def grad(du, dv):
        return 2.0 * du + dv, 3.0 * dv

    return (x * 2.0, x + 3.0 * y), grad


def test_a_read_of_a_keras_variable_is_recorded_with_its_value():
    backend = _core.backend_module()
    v = keras.Variable(np.array([1.0, 2.0], dtype="float32"), name="scale")
    output, reads = _call.run_reading(backend, lambda x: x * v, (t([3.0, 4.0]),))
    assert reads.variables == [v]
    assert len(reads.values) == 1 and np.allclose(npy(reads.values[0]), [1.0, 2.0])
    assert np.allclose(npy(output), [3.0, 8.0])
    assert reads.losses_added == 0


def test_a_call_that_reads_nothing_shares_the_empty_reads():
    backend = _core.backend_module()
    _, reads = _call.run_reading(backend, lambda x: x + 1.0, (t(1.0),))
    assert reads is _call.NO_READS


def test_a_loss_added_in_f_is_counted():
    backend = _core.backend_module()
    layer = keras.layers.Dense(1)
    layer.build((None, 1))

    def f(x):
        layer.add_loss(keras.ops.sum(x))
        return x

    _, reads = _call.run_reading(backend, f, (t([[1.0]]),))
    assert reads.losses_added == 1


def test_the_backends_own_watcher_is_none_or_sees_framework_variables():
    backend = _core.backend_module()
    watcher = backend.watching_reads()
    if BACKEND == "tensorflow":
        import tensorflow as tf

        v = tf.Variable(2.0)
        with watcher:
            _ = v * 1.0
        assert list(watcher.watched_variables()) == [v]
    else:
        assert watcher is None, f"{BACKEND} has no variables of its own to watch"


def _backward():
    x, y = t([1.0, 2.0]), t([3.0, 4.0])
    arguments = _call.Arguments(_two_outputs, (x, y), {}, _core.backend_module())
    _, _, backward = arguments.forward(arguments.tensor_values)
    return backward


def test_a_link_of_every_output_and_input_gives_every_gradient_in_order():
    link = _backward().link()
    gx, gy = link([t([1.0, 1.0]), t([10.0, 10.0])])
    assert np.allclose(npy(gx), [12.0, 12.0]) and np.allclose(npy(gy), [30.0, 30.0])


def test_a_link_of_some_outputs_and_inputs_puts_each_gradient_in_its_place():
    # the autodiff linked only the second output and takes only y's gradient
    link = _backward().link(outputs=[1], inputs=[1])
    (gy,) = link([t([10.0, 10.0])])
    assert np.allclose(npy(gy), [30.0, 30.0])
    # the first output's upstream was zeros: x's gradient is dv alone
    (gx,) = _backward().link(outputs=[1], inputs=[0])([t([10.0, 10.0])])
    assert np.allclose(npy(gx), [10.0, 10.0])


def test_a_link_gives_the_wanted_variable_values_gradients_after_the_inputs():
    v = keras.Variable(np.array([2.0, 2.0], dtype="float32"))

    def scaled(x):
        return x * v, lambda dy, variables=None: (dy * v, [dy * x])

    arguments = _call.Arguments(scaled, (t([1.0, 5.0]),), {}, _core.backend_module())
    _, _, backward = arguments.forward(arguments.tensor_values)
    assert backward.reads.variables == [v]
    other = keras.Variable(1.0)
    gx, gv, g_other = backward.link(wanted=[backward.reads.values[0], other])(
        [t([1.0, 1.0])])
    assert np.allclose(npy(gx), [2.0, 2.0]) and np.allclose(npy(gv), [1.0, 5.0])
    assert g_other is None  # a variable f did not read gets no gradient
    (gx_alone,) = backward.link()([t([1.0, 1.0])])
    assert np.allclose(npy(gx_alone), [2.0, 2.0])


def test_a_guard_runs_before_grad_fn_and_may_refuse():
    def refuse():
        raise customgrad.CustomGradientError("refused by the backend")

    with pytest.raises(customgrad.CustomGradientError, match="refused by the backend"):
        _backward().link(guard=refuse)([t([1.0, 1.0]), t([1.0, 1.0])])


def test_the_positional_link_takes_the_autodiffs_upstreams_as_they_come():
    x = t([1.0, 2.0])
    spec = (x.shape, x.dtype, None)
    link = _call.PositionalLink(lambda x: x, lambda du, dv: (du + dv,),
                                _core.backend_module(), [spec], 2, tuple)
    (gx,) = link([t([1.0, 1.0]), t([2.0, 2.0])])
    assert np.allclose(npy(gx), [3.0, 3.0])
    with pytest.raises(customgrad.GradFnArityError):
        _call.PositionalLink(lambda x: x, lambda du, dv, dw: du, _core.backend_module(), [spec],
                             2, tuple)([t([1.0, 1.0]), t([2.0, 2.0])])


def test_the_positional_link_leaves_what_it_does_not_accept_as_it_is_to_the_general_rules():
    """Gradients of another shape or dtype than their input's go through `checked_gradients`
    (its Backward built then): a float64 numpy array is converted, a wrong shape is refused."""
    x = t([1.0, 2.0])
    spec = (x.shape, x.dtype, None)
    backend = _core.backend_module()
    link = _call.PositionalLink(lambda x: x, lambda dy: np.array([2.0, 2.0]), backend, [spec],
                                1, None)
    (gx,) = link([t([1.0, 1.0])])
    assert np.allclose(npy(gx), [2.0, 2.0]) and gx.dtype == x.dtype
    assert tuple(link.backward.input_specs[0].shape) == tuple(x.shape)
    with pytest.raises(customgrad.CustomGradientError, match="shape"):
        _call.PositionalLink(lambda x: x, lambda dy: t([1.0, 2.0, 3.0]), backend, [spec], 1,
                             None)([t([1.0, 1.0])])
    calls = []
    guarded = _call.PositionalLink(lambda x: x, lambda dy: dy, backend, [spec], 1, None,
                                   lambda: calls.append("guard"))
    guarded([t([1.0, 1.0])])
    assert calls == ["guard"]
