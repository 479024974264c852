"""JAX's own custom-gradient tests, restated for `customgrad.custom_gradient`.

Each test below checks, with `jax.grad`/`jax.vjp` on a customgrad-decorated function, the behaviour
one of JAX's tests checks for `jax.custom_gradient` (its name is in the docstring): code written for
`jax.custom_gradient` must run unchanged once the decorator is swapped.
"""

import numpy as np
import pytest
from helpers import only_on

pytestmark = [only_on("jax"), pytest.mark.autodiff]
import jax  # noqa: E402

jnp = jax.numpy

import customgrad  # noqa: E402


def test_square_with_a_tuple_returning_vjp_gives_value_gradient_and_second_derivative():
    """JAX: custom_api_test.py CustomVJPTest.test_custom_gradient."""

    @customgrad.custom_gradient
    def half_derivative_square(x):
        return x ** 2, lambda g: (g * x,)

    np.testing.assert_allclose(half_derivative_square(3.0), 9.0)
    np.testing.assert_allclose(jax.grad(half_derivative_square)(3.0), 3.0)
    np.testing.assert_allclose(jax.grad(jax.grad(half_derivative_square))(3.0), 1.0)


def test_product_of_two_python_floats_gets_swapped_partials_for_both_arguments():
    """JAX: custom_api_test.py CustomVJPTest.test_custom_gradient_2."""

    @customgrad.custom_gradient
    def product(x, y):
        return x * y, lambda g: (y, x)

    np.testing.assert_allclose(product(3.0, 4.0), 12.0)
    dx, dy = jax.grad(product, argnums=(0, 1))(3.0, 4.0)
    np.testing.assert_allclose([dx, dy], [4.0, 3.0])


def test_vector_input_with_scalar_output_uses_the_vjp_and_accepts_an_int_array_forward():
    """JAX: custom_api_test.py CustomVJPTest.test_custom_gradient_3."""

    @customgrad.custom_gradient
    def weighted_sin_sum(x):
        vjp = lambda g: (jnp.cos(x) * jnp.arange(3.0, 6.0),)  # noqa: E731
        return jnp.sum(jnp.sin(x)), vjp

    # the forward runs on an integer array too (no gradient is asked for)
    np.testing.assert_allclose(weighted_sin_sum(jnp.arange(3)), np.sum(np.sin(np.arange(3.0))),
                               rtol=1e-6)
    expected = np.cos(np.arange(3.0)) * np.arange(3.0, 6.0)
    np.testing.assert_allclose(jax.grad(weighted_sin_sum)(jnp.arange(3.0)), expected, rtol=1e-6)


def test_vjp_may_return_a_bare_value_instead_of_a_one_element_tuple():
    """JAX: custom_api_test.py CustomVJPTest.test_custom_gradient_can_return_singleton_value_in_vjp."""

    @customgrad.custom_gradient
    def half_derivative_square(x):
        return x ** 2, lambda g: g * x

    np.testing.assert_allclose(half_derivative_square(3.0), 9.0)
    np.testing.assert_allclose(jax.grad(half_derivative_square)(3.0), 3.0)
    np.testing.assert_allclose(jax.grad(jax.grad(half_derivative_square))(3.0), 1.0)


def test_numpy_scalar_input_is_differentiated_like_a_python_float():
    """JAX: custom_api_test.py CustomVJPTest.test_custom_gradient, with the numpy float32 scalar its docs'
    users pass as often as a Python float."""

    @customgrad.custom_gradient
    def half_derivative_square(x):
        return x ** 2, lambda g: (g * x,)

    np.testing.assert_allclose(jax.grad(half_derivative_square)(np.float32(3.0)), 3.0)


def test_jitted_grad_of_a_python_float_function_matches_eager():
    """JAX: custom_api_test.py CustomVJPTest.test_custom_gradient_2 under jax.jit (JAX's tests run their
    functions both ways)."""

    @customgrad.custom_gradient
    def product(x, y):
        return x * y, lambda g: (y, x)

    grads = jax.jit(jax.grad(product, argnums=(0, 1)))(3.0, 4.0)
    np.testing.assert_allclose(np.asarray(grads), [4.0, 3.0])


def test_an_integer_output_next_to_a_float_one_survives_stop_gradient_and_a_second_call():
    """JAX: lax_test.py LaxTest.test_stop_gradient_on_ints (the custom_gradient use in lax_test.py): a pair
    output (float, int) whose one-parameter vjp ignores its input; stop_gradient on the pair keeps
    both of the same type, and grad runs through two calls of the function."""

    @customgrad.custom_gradient
    def with_rounded(x):
        def vjp(g):
            return jnp.ones_like(x)

        return (x, jnp.round(x).astype(jnp.int32)), vjp

    seen_types = []

    def loss(x):
        y, i = with_rounded(x)
        y_stopped, i_stopped = jax.lax.stop_gradient((y, i))
        seen_types.append((type(y_stopped), type(i_stopped)))
        return jnp.sum(with_rounded(y)[0])

    g = jax.grad(loss)(jnp.ones((3,)))
    assert seen_types and seen_types[0][0] is seen_types[0][1]
    np.testing.assert_allclose(g, np.ones(3))
