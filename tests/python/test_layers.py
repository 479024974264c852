"""customgrad.layers: forward, gradient, and a .keras save/load round trip with identical
outputs and gradients, on every backend."""

import os

import keras
import numpy as np
import pytest
from helpers import npy, t
from keras import ops as kops

import customgrad
from customgrad.layers import ClipGradient, GradientReversal, ScaleGradient, StraightThroughQuantizer

autodiff = pytest.mark.autodiff


def input_grad(model, x, weights):
    return npy(customgrad.grad(lambda x: kops.sum(model(x) * weights))(x))


@autodiff
@pytest.mark.parametrize("layer,expected", [
    (GradientReversal(2.0), [-2.0, -4.0, -6.0]),
    (ScaleGradient(0.5), [0.5, 1.0, 1.5]),
    (ClipGradient(min_value=-1.5, max_value=1.5), [1.0, 1.5, 1.5]),
    (ClipGradient(max_norm=1.0), list(np.array([1.0, 2.0, 3.0]) / np.sqrt(14.0))),
    (StraightThroughQuantizer(levels=5, min_value=-1.0, max_value=1.0), [1.0, 2.0, 3.0]),
], ids=["reversal", "scale", "clip", "clip-norm", "quantizer"])
def test_layer_forward_and_gradient(layer, expected):
    x = t([[0.3, -0.2, 0.9]])
    y = npy(layer(x))
    if isinstance(layer, StraightThroughQuantizer):
        np.testing.assert_allclose(y, [[0.5, 0.0, 1.0]])
    else:
        np.testing.assert_array_equal(y, npy(x))
    g = npy(customgrad.grad(lambda x: kops.sum(layer(x) * t([[1.0, 2.0, 3.0]])))(x))
    np.testing.assert_allclose(g, [expected], rtol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: GradientReversal(scale=0.7),
    lambda: ScaleGradient(scale=3.0),
    lambda: ClipGradient(min_value=-0.1, max_value=0.1, max_norm=2.0),
    lambda: ClipGradient(max_norm=0.5, across_replicas=True),
    lambda: StraightThroughQuantizer(levels=8, min_value=-2.0, max_value=2.0),
], ids=["reversal", "scale", "clip", "clip-across-replicas", "quantizer"])
def test_model_saves_to_keras_file_and_loads_with_identical_outputs_and_gradients(make, tmp_path):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, activation="tanh")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2)(make()(hidden)))
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    layer = loaded.layers[2]
    assert type(layer).__module__ == "customgrad.layers"
    assert layer.get_config() == model.layers[2].get_config()
    x = t(np.random.default_rng(1).normal(size=(5, 3)))
    np.testing.assert_array_equal(npy(loaded(x)), npy(model(x)))
    if keras.backend.backend() != "numpy":
        w = t(np.random.default_rng(2).normal(size=(5, 2)))
        np.testing.assert_array_equal(input_grad(loaded, x, w), input_grad(model, x, w))


@pytest.mark.parametrize("make,message", [
    (lambda: GradientReversal(scale="big"), "GradientReversal: scale must be a number; received 'big'"),
    (lambda: ClipGradient(), "give min_value and max_value, max_norm, or both; received none"),
    (lambda: ClipGradient(min_value=-1.0), "min_value and max_value go together; received "
                                           "min_value=-1.0, max_value=None"),
    (lambda: ClipGradient(max_norm=-1.0), "ClipGradient: max_norm must be > 0; received -1.0"),
    (lambda: ClipGradient(max_norm=1.0, across_replicas=1),
     "ClipGradient: across_replicas must be True or False; received 1"),
    (lambda: StraightThroughQuantizer(levels=1), "levels must be an int >= 2; received 1"),
    (lambda: StraightThroughQuantizer(min_value=1.0, max_value=1.0),
     "max_value must be > min_value; received min_value=1.0, max_value=1.0"),
])
def test_layer_arguments_are_validated(make, message):
    with pytest.raises((TypeError, ValueError), match=message.replace("(", r"\(")):
        make()


@autodiff
def test_quantizer_trains_layers_before_it():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(256, 2)).astype("float32")
    y = (0.6 * x[:, :1] - 0.3 * x[:, 1:]).astype("float32")
    inputs = keras.Input((2,))
    q = StraightThroughQuantizer(levels=33, min_value=-1.0, max_value=1.0)(
        keras.layers.Dense(1)(inputs))
    model = keras.Model(inputs, q)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    history = model.fit(x, y, epochs=30, batch_size=32, verbose=0)
    assert history.history["loss"][-1] < 0.05 * history.history["loss"][0]
