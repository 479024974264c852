"""Tensors that reach f other than as positional arguments (by keyword, or closed over) while
they are being differentiated: one behaviour on every backend, a CustomGradientError that says to
pass them positionally, wherever the backend lets customgrad see it."""

import os
import re
import types

import keras
import numpy as np
import pytest
from helpers import npy, t

import customgrad
from customgrad import CustomGradientError, _messages as msg

autodiff = pytest.mark.autodiff
PASS_POSITIONALLY = "Pass it as a positional argument and return its gradient from grad_fn."


def scaled(x, scale):
    """x * scale with grad_fn's gradient 100 * dy for x (so any other value is autodiff's)."""
    return x * scale, lambda dy: dy * 100.0


def closing_over(y):
    @customgrad.custom_gradient
    def f(x):
        return x * y, lambda dy: dy * 100.0

    return f


@customgrad.custom_gradient
def by_keyword(x, scale=None):
    return scaled(x, scale)


@autodiff
@pytest.mark.parametrize("wrt", [(1,), (0, 1)], ids=["only-the-hidden-tensor", "both"])
def test_keyword_tensor_being_differentiated_is_an_error(wrt):
    fn = customgrad.grad(lambda x, y: by_keyword(x, scale=y), argnums=wrt)
    with pytest.raises(CustomGradientError, match=re.escape(
            "`by_keyword` uses the tensor passed by keyword `scale`, which is being "
            "differentiated")) as info:
        fn(t(3.0), t(2.0))
    assert PASS_POSITIONALLY in str(info.value)


@autodiff
def test_of_several_keyword_tensors_being_differentiated_the_first_is_named():
    @customgrad.custom_gradient
    def two_keywords(x, shift=None, scale=None):
        return x * scale + shift, lambda dy: dy

    fn = customgrad.grad(lambda x, y, z: two_keywords(x, shift=y, scale=z), argnums=(1, 2))
    with pytest.raises(CustomGradientError, match="passed by keyword `shift`"):
        fn(t(3.0), t(2.0), t(4.0))


@autodiff
@pytest.mark.parametrize("wrt", [(1,), (0, 1)], ids=["only-the-hidden-tensor", "both"])
def test_closed_over_tensor_being_differentiated_is_an_error(wrt):
    fn = customgrad.grad(lambda x, y: closing_over(y)(x), argnums=wrt)
    # on torch, customgrad.grad's inputs are leaf tensors, which are variables there: grad_fn
    # must then accept variables= (see test_framework_variables), else it is an error too
    with pytest.raises(CustomGradientError, match=r"closing_over.<locals>.f` (uses the tensor "
                       r"`y` it closes over|used tensors that require grad)"):
        fn(t(3.0), t(2.0))


@autodiff
def test_keyword_and_closed_over_constants_pass_through():
    scale = t(2.0)
    g1 = customgrad.grad(lambda x: by_keyword(x, scale=scale))(t(3.0))
    g2 = customgrad.grad(lambda x: closing_over(scale)(x))(t(3.0))
    assert float(npy(g1)) == 100.0 and float(npy(g2)) == 100.0


@autodiff
def test_the_same_positionally_gives_grad_fns_gradient():
    @customgrad.custom_gradient
    def f(x, y):
        return x * y, lambda dy: (dy * 100.0, dy * 10.0)

    gx, gy = customgrad.grad(lambda x, y: f(x, y), argnums=(0, 1))(t(3.0), t(2.0))
    assert (float(npy(gx)), float(npy(gy))) == (100.0, 10.0)


@pytest.mark.backends("jax")
@pytest.mark.parametrize("hidden", ["keyword", "closure"])
def test_jax_grad_of_jit_refuses_the_hidden_tensor(hidden):
    # inside the jit the tensor is a jit tracer, not a differentiation tracer, so customgrad
    # cannot tell it is differentiated while f runs; it passes it to custom_vjp as an extra
    # input, whose forward rule refuses it by name once the outer grad differentiates it
    import jax

    x = t(3.0)
    fn = ((lambda y: by_keyword(x, scale=y)) if hidden == "keyword"
          else (lambda y: closing_over(y)(x)))
    with pytest.raises(CustomGradientError, match="which is being differentiated") as info:
        jax.grad(jax.jit(fn))(t(2.0))
    assert ("keyword `scale`" if hidden == "keyword" else "`y` it closes over") in str(info.value)


@pytest.mark.backends("jax")
def test_jax_jit_alone_takes_keyword_and_closed_over_tracers():
    import jax

    x = t(3.0)
    out = jax.jit(lambda y: by_keyword(x, scale=y) + closing_over(y)(x))(t(2.0))
    assert float(out) == 12.0


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("hidden", ["keyword", "closure"])
def test_tensorflow_tape_outside_tf_function_gets_autodiffs_gradient(hidden):
    """A tape opened outside a tf.function is not visible while the function is traced, so a
    keyword or closed-over tensor it watches cannot be refused: it gets autodiff's gradient
    through f's own operations (x * y: x, 3.0), not None as with tf.custom_gradient. With the
    tape inside it is refused."""
    import tensorflow as tf

    x, y = t(3.0), t(2.0)
    fn = tf.function((lambda y: by_keyword(x, scale=y)) if hidden == "keyword"
                     else (lambda y: closing_over(y)(x)))
    with tf.GradientTape() as tape:
        tape.watch(y)
        out = fn(y)
    assert float(tape.gradient(out, y)) == 3.0
    # the same with the tape inside the tf.function is caught
    with pytest.raises(CustomGradientError, match="which is being differentiated"):
        tf.function(autograph=False, func=lambda y: customgrad.grad(
            (lambda y: by_keyword(x, scale=y)) if hidden == "keyword"
            else (lambda y: closing_over(y)(x)))(y))(y)


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("input_watched", [False, True])
def test_tensorflow_tensor_computed_from_a_variable_read_through_an_object_is_an_error(
        input_watched):
    """A tensor computed from a variable before f ran, read through nested containers f closes
    over (where neither the closure check nor the walk of objects' attributes and elements finds
    it, so it has no name): its gradient was dropped silently (None); where f ran on unwatched inputs and read
    no variable it is a CustomGradientError, as on torch an unfindable one is and on jax
    custom_vjp refuses it."""
    import tensorflow as tf

    v = tf.Variable([2.0, 3.0])
    x = t([1.0, 1.0])
    with tf.GradientTape() as tape:
        if input_watched:
            tape.watch(x)
        holder = [[v * 1.0]]

        @customgrad.custom_gradient
        def f(x):
            return x * holder[0][0], lambda dy: dy * 10.0

        with pytest.raises(CustomGradientError, match=re.escape(
                "uses a tensor it did not receive as an argument (read through an object), "
                "which is being differentiated")):
            f(x)


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("mode", ["eager", "tf.function"])
@pytest.mark.parametrize("tapes", ["one tape, f reads a variable", "a persistent tape",
                                   "nested tapes"])
def test_tensorflow_watched_tensor_read_through_an_object_is_named(tapes, mode):
    """A tensor computed from a variable before f ran, read as an attribute of an object f
    reaches (here a Keras layer's, through `self`): named in a CustomGradientError under every
    arrangement of tapes, eager and in a tf.function with the tape inside it. It was silent
    (its gradient None) where f also read a variable, under nested or persistent tapes, and in
    tf.function."""
    import tensorflow as tf

    class Scaled(keras.layers.Layer):
        def build(self, shape):
            self.kernel = self.add_weight(shape=shape[1:], initializer="ones")
            self.bias = self.add_weight(shape=shape[1:], initializer="zeros")

        def call(self, x):
            self.effective = self.kernel * 2.0  # computed from a variable before f runs

            @customgrad.custom_gradient
            def f(x):
                def grad(dy, variables=None):
                    return dy * self.effective, [dy * 0.0]

                return x * self.effective + self.bias, grad

            return f(x)

    layer = Scaled()
    x = t([[1.0, 2.0]])
    layer.build(x.shape)

    def gradients(x):
        with tf.GradientTape(persistent=tapes == "a persistent tape") as outer:
            outer.watch(x)
            if tapes == "nested tapes":
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    y = layer(x)
            else:
                y = layer(x)
        return outer.gradient(y, layer.kernel.value)

    run = gradients if mode == "eager" else tf.function(gradients, autograph=False)
    with pytest.raises(CustomGradientError, match=re.escape(
            "uses the tensor `self.effective`, read through an object, which is being "
            "differentiated")):
        run(x)


@pytest.mark.backends("tensorflow")
def test_tensorflow_watched_tensor_read_through_a_module_attribute_is_named():
    """A module f names is searched for the attributes f's code names (`state.effective`),
    not all of its attributes (keras.ops has hundreds, and the search runs on every call)."""
    import types

    import tensorflow as tf

    state = types.ModuleType("state")
    v = tf.Variable([2.0, 3.0])
    x = t([1.0, 1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        state.effective = v * 2.0

        @customgrad.custom_gradient
        def f(x):
            return keras.ops.exp(x) * state.effective, lambda dy: dy * 10.0

        with pytest.raises(CustomGradientError, match=re.escape(
                "uses the tensor `state.effective`, read through an object, which is being "
                "differentiated")):
            f(x)


def test_of_a_library_module_only_the_attributes_the_code_names_are_searched():
    """A library's module (keras.ops has hundreds of attributes) is searched for the attributes
    f names; a user's module whole, so that one read by the module's own function is found."""
    import sysconfig
    import types

    from customgrad._closure import tensors_reachable

    def module_holding(file):
        module = types.ModuleType("state")
        if file is not None:
            module.__file__ = file
        module.read, module.unread = np.ones(2), np.zeros(2)
        exec("def h():\n    return unread\n", module.__dict__)
        return module

    library = module_holding(os.path.join(sysconfig.get_paths()["purelib"], "lib", "state.py"))
    user = module_holding(None)
    user_file = module_holding(os.path.join(os.getcwd(), "state.py"))

    def names(module):
        def f(x):
            return x * module.read + module.h()
        return [name for name, _ in tensors_reachable([f], lambda x: isinstance(x, np.ndarray))]

    assert names(library) == ["module.read"]
    assert names(user) == ["module.read", "module.unread"]
    assert names(user_file) == ["module.read", "module.unread"]


@pytest.mark.backends("tensorflow")
def test_tensorflow_unwatched_or_unused_attributes_are_no_error():
    """Attributes f reaches but does not use, or that no tape watches, are no hidden input."""
    import types

    import tensorflow as tf

    v = tf.Variable([2.0, 3.0])
    x = t([1.0, 1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        holder = types.SimpleNamespace(unused=v * 1.0, constant=tf.constant([4.0, 5.0]))

        @customgrad.custom_gradient
        def f(x):
            return x * holder.constant, lambda dy: dy * 10.0

        y = f(x)
    np.testing.assert_array_equal(npy(tape.gradient(y, x)), [10.0, 10.0])


@pytest.mark.backends("jax")
def test_jax_tensor_read_through_an_object_is_never_dropped():
    """A traced array f reads through an object is refused by name, eagerly and under jax.jit:
    eager jax.grad used to differentiate f's own operations for it (autodiff's gradient, not
    grad_fn's), where tensorflow and torch refuse it; under jax.jit it was jax's bare
    UnexpectedTracerError."""
    import types

    import jax
    import jax.numpy as jnp

    def loss(w, x):
        holder = types.SimpleNamespace(w=w * 2.0)

        @customgrad.custom_gradient
        def f(x):
            return x * holder.w, lambda dy: dy * 10.0

        return jnp.sum(f(x))

    x = jnp.array([1.0, 3.0])
    for transform in (jax.grad, lambda g: jax.jit(jax.grad(g))):
        with pytest.raises(CustomGradientError, match=re.escape(
                "reaches `holder.w`, a tensor being differentiated, through an object")):
            transform(loss)(jnp.ones(2), x)


@pytest.mark.backends("tensorflow")
def test_tensorflow_watched_tensor_in_a_list_f_closes_over_is_named():
    """An element of a list f closes over, while f also reads a variable: named."""
    import tensorflow as tf

    v = tf.Variable([2.0, 3.0])
    k = keras.Variable([1.0, 1.0])
    x = t([1.0, 1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        scales = [v * 1.0]

        @customgrad.custom_gradient
        def f(x):
            return x * scales[0] + k, lambda dy, variables=None: (dy * 10.0, [dy])

        with pytest.raises(CustomGradientError, match=re.escape(
                "uses the tensor `scales[0]`, read through an object")):
            f(x)


# --- found by the autodiff's own record, whatever Python route led f to the tensor -----------

class _Holder:
    def __init__(self, value):
        self._value = value

    def get(self):
        return self._value


def _reading_through_a_bound_method(get):
    """f reads its scale through a bound method of an object in a partial: no walk of f's
    closure reaches it (the record of what f computed does)."""
    import functools

    read = functools.partial(lambda g: g(), get)

    @customgrad.custom_gradient
    def f(x):
        return x * read(), lambda dy: dy * 100.0

    return f


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("where", ["eager", "tf.function"])
def test_tensorflow_a_watched_tensor_any_route_deep_is_refused(where):
    import tensorflow as tf

    x, p = t(3.0), t(2.0)

    def gradients(x, p):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, p])
            f = _reading_through_a_bound_method(_Holder(p * 2.0).get)
            y = f(x)
        return tape.gradient(y, [x, p])

    run = gradients if where == "eager" else tf.function(gradients, autograph=False)
    with pytest.raises(CustomGradientError, match="which is being differentiated"):
        run(x, p)


@pytest.mark.backends("tensorflow")
def test_tensorflow_tape_outside_tf_function_gets_autodiffs_gradient_any_route_deep():
    import tensorflow as tf

    x, p = t(3.0), t(2.0)

    @tf.function(autograph=False)
    def fn(x, p):
        return _reading_through_a_bound_method(_Holder(p * 2.0).get)(x)

    with tf.GradientTape() as tape:
        tape.watch([x, p])
        y = fn(x, p)
    gx, gp = tape.gradient(y, [x, p])
    # grad_fn's 100 for x; autodiff's through f's own x * (2 p) for p: 2 x = 6
    assert (float(gx), float(gp)) == (100.0, 6.0)


@pytest.mark.backends("jax")
@pytest.mark.parametrize("transform", ["grad", "jit(grad)", "grad(jit)"])
def test_jax_a_differentiated_tracer_any_route_deep_is_refused_by_name(transform):
    """grad(jit): inside the jit the value is the jit's own tracer, which jit alone takes; the
    grad differentiates it later, where jax's own CustomVJPException would end the call."""
    import jax

    def loss(x, p):
        return keras.ops.sum(_reading_through_a_bound_method(_Holder(p * 2.0).get)(x))

    if transform == "grad(jit)":
        run = jax.grad(jax.jit(loss), argnums=(0, 1))
    else:
        grad = jax.grad(loss, argnums=(0, 1))
        run = grad if transform == "grad" else jax.jit(grad)
    with pytest.raises(msg.JaxHiddenTracerError, match="instead of receiving it"):
        run(t([3.0]), t([2.0]))


@pytest.mark.backends("jax")
def test_jax_jit_alone_takes_its_own_tracer_any_route_deep():
    import jax

    def fn(x, p):
        return _reading_through_a_bound_method(_Holder(p * 2.0).get)(x)

    assert float(jax.jit(fn)(t([3.0]), t([2.0]))[0]) == 12.0


@pytest.mark.backends("jax")
@pytest.mark.parametrize("route", ["attribute", "bound method in a partial"])
def test_jax_grad_of_jit_with_respect_to_x_alone_is_grad_fns(route):
    """Under jax.grad(jax.jit(...)) f runs again when the grad differentiates the jit: reading
    the value again from its object, it would get the first trace's tracer (before: jax's bare
    "No constant handler" TypeError). The call is a jaxpr with that value as an input
    (`link.hoisted_call`), and only x is differentiated: grad_fn's 100."""
    import jax

    def fn(x, p):
        if route == "attribute":
            h = types.SimpleNamespace(t=p * 2.0)

            @customgrad.custom_gradient
            def f(x):
                return x * h.t, lambda dy: dy * 100.0
        else:
            f = _reading_through_a_bound_method(_Holder(p * 2.0).get)
        return keras.ops.sum(f(x))

    g = jax.grad(lambda x: jax.jit(fn)(x, t([2.0])))(t([3.0]))
    assert float(g[0]) == 100.0
    assert float(jax.jit(jax.grad(fn))(t([3.0]), t([2.0]))[0]) == 100.0


@pytest.mark.backends("torch")
@pytest.mark.parametrize("x_too", [False, True], ids=["p", "x and p"])
@pytest.mark.parametrize("transform", ["torch.func.jvp", "forward_ad"])
def test_torch_a_tangent_any_route_deep_is_refused_by_name(transform, x_too):
    """With x's tangent too, f runs on x's primal (`forward_mode.primals`): else f's own tangent
    of x would hide the hidden one, and only x's part of the JVP would come back."""
    import torch
    from torch.autograd import forward_ad

    x, dx, p, dp = t([3.0]), t([1.0]), t([2.0]), t([1.0])

    def fn(x, p):
        return _reading_through_a_bound_method(_Holder(p * 2.0).get)(x)

    with pytest.raises(msg.TorchHiddenTangentError, match="cannot tell which tensor"):
        if transform == "torch.func.jvp":
            if x_too:
                torch.func.jvp(fn, (x, p), (dx, dp))
            else:
                torch.func.jvp(lambda p: fn(x, p), (p,), (dp,))
        else:
            with forward_ad.dual_level():
                fn(forward_ad.make_dual(x, dx) if x_too else x, forward_ad.make_dual(p, dp))


@pytest.mark.backends("torch")
def test_torch_forward_mode_with_x_alone_is_grad_fns():
    import torch

    x, p = t([3.0]), t([2.0])
    _, tangent = torch.func.jvp(lambda x: _reading_through_a_bound_method(_Holder(p * 2.0).get)(x),
                                (x,), (t([1.0]),))
    assert float(tangent[0]) == 100.0  # the JVP derived from grad_fn


@pytest.mark.backends("torch")
@pytest.mark.parametrize("fullgraph", [False, True])
def test_torch_compile_a_tensor_requiring_grad_any_route_deep_is_refused(fullgraph):
    """While torch.compile traces f there are no autograd nodes to walk: f runs on its inputs
    detached, and an output that still requires grad sends the call to the eager path, whose
    walk refuses the value (computed before f ran, through no object it closes over). Before,
    with x requiring grad too, p's gradient was lost."""
    import torch

    x = t([3.0]).requires_grad_(True)
    p = t([2.0]).requires_grad_(True)
    holder = _Holder(p * 2.0)
    f = _reading_through_a_bound_method(holder.get)
    compiled = torch.compile(lambda x: f(x).sum(), backend="aot_eager", fullgraph=fullgraph)
    with pytest.raises(CustomGradientError, match="computed before it ran"):
        compiled(x).backward()


@pytest.mark.backends("torch")
@pytest.mark.parametrize("mode", ["backward", "torch.func.jvp"])
def test_torch_a_buffer_functional_call_swaps_in_reaches_grad_fn_in_both_modes(mode):
    """A module's buffer is one of its slots, as its parameters are: a tensor functional_call
    swaps into it is a weight of the call, whose gradient grad_fn gives through `variables=`, in
    reverse mode and forward mode alike (the two walks once disagreed: reverse refused it)."""
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(2))

        def forward(self, x):
            @customgrad.custom_gradient
            def f(x):
                b = self.b

                def grad(dy, variables):
                    return dy * b * 3.0, [dy * x * 3.0 for _ in variables]
                return x * b, grad
            return f(x)

    module = Scaled()
    x, p = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])

    def fn(p):
        return torch.func.functional_call(module, {"b": 2.0 * p}, (x,))

    if mode == "backward":
        p.requires_grad_(True)
        fn(p).sum().backward()
        got = p.grad
    else:
        got = torch.func.jvp(fn, (p,), (torch.ones(2),))[1]
    np.testing.assert_allclose(npy(got), [6.0, 12.0])  # 3 x (grad_fn's) times d(2p)/dp
