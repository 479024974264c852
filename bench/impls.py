"""The functions under benchmark, each written four ways for the active Keras backend:

  autodiff    plain autodiff of the forward (no custom gradient)
  native      the backend's own custom mechanism written by hand (jax.custom_vjp,
              tf.custom_gradient, torch.autograd.Function), with the keras.ops bodies
  native_raw  the same mechanism with the backend's own ops (jnp, tf.math, torch): what a user
              of that framework writes without Keras (eager timings only)
  keras       keras.ops.custom_gradient (its backend-agnostic idiom)
  customgrad  customgrad.custom_gradient
  floor       (torch, eager timings only) customgrad's mechanism with none of customgrad's code:
              f runs with autograd on, its outputs are detached and re-attached to the inputs by
              an autograd.Function whose backward calls grad_fn. This is what double backward
              through grad_fn and finding the parameters f reads need; keras.ops.custom_gradient
              and a hand-written autograd.Function run f under no_grad instead, which is cheaper
              and gets neither.

Functions: softplus (log1pexp), memory-efficient swish (the backward keeps only x and recomputes
the sigmoid), and a 3-input / 2-output function. Every variant computes the same values and
gradients; `step(kind, fn)` returns a callable running forward + backward on given inputs.
"""

import keras
from keras import ops

import customgrad

BACKEND = keras.backend.backend()


# --- the math, in keras.ops, shared by every variant ------------------------------------------
# The backward formulas are nested so that few full-size temporaries live at once, as in plain
# autodiff's fused gradient kernels. The first versions, dy * (1 - 1 / (1 + e)) and
# dy * (s + x * s * (1 - s)), peaked 1.33x (torch) and 1.25x (tensorflow) above plain autodiff
# for the native mechanisms and customgrad alike: one temporary more, nothing held.
def softplus_fwd(x):
    e = ops.exp(x)
    return ops.log1p(e), e


def softplus_bwd(e, dy):
    return dy - dy / (1.0 + e)  # = dy * sigmoid(x); exact where e overflows to inf


def swish_fwd(x):
    return x * ops.sigmoid(x)


def swish_bwd(x, dy):
    s = ops.sigmoid(x)
    return dy * (s * (1.0 + x * (1.0 - s)))


def three_fwd(a, b, c):
    return a * b + c, ops.sin(a) * c


def three_bwd(a, b, c, du, dv):
    return du * b + dv * ops.cos(a) * c, du * a, du + dv * ops.sin(a)


# --- customgrad and keras.ops.custom_gradient ------------------------------------------------
def _with_custom_gradient(decorator, agnostic_grad):
    @decorator
    def softplus(x):
        y, e = softplus_fwd(x)
        return y, agnostic_grad(lambda dy: softplus_bwd(e, dy))

    @decorator
    def swish(x):
        return swish_fwd(x), agnostic_grad(lambda dy: swish_bwd(x, dy))

    @decorator
    def three(a, b, c):
        def grad(*args, upstream=None):
            du, dv = upstream if upstream is not None else args
            return three_bwd(a, b, c, du, dv)

        return three_fwd(a, b, c), grad

    return {"softplus": softplus, "swish": swish, "three": three}


def _agnostic(g):
    """Keras's documented backend-agnostic grad signature around a one-argument grad."""

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return g(upstream)

    return grad


def _plain(g):
    """customgrad takes the one-argument grad as it is (no adapter, as in the native variants)."""
    return g


# --- the backends' native mechanisms -----------------------------------------------------------
def _native_jax():
    import jax

    softplus = jax.custom_vjp(lambda x: softplus_fwd(x)[0])
    softplus.defvjp(lambda x: softplus_fwd(x), lambda e, dy: (softplus_bwd(e, dy),))
    swish = jax.custom_vjp(swish_fwd)
    swish.defvjp(lambda x: (swish_fwd(x), x), lambda x, dy: (swish_bwd(x, dy),))
    three = jax.custom_vjp(three_fwd)
    three.defvjp(lambda a, b, c: (three_fwd(a, b, c), (a, b, c)),
                 lambda r, g: three_bwd(*r, *g))
    return {"softplus": softplus, "swish": swish, "three": three}


def _native_tensorflow():
    import tensorflow as tf

    @tf.custom_gradient
    def softplus(x):
        y, e = softplus_fwd(x)
        return y, lambda dy: softplus_bwd(e, dy)

    @tf.custom_gradient
    def swish(x):
        return swish_fwd(x), lambda dy: swish_bwd(x, dy)

    @tf.custom_gradient
    def three(a, b, c):
        return three_fwd(a, b, c), lambda du, dv: three_bwd(a, b, c, du, dv)

    return {"softplus": softplus, "swish": swish, "three": three}


def _native_torch():
    import torch

    class Softplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y, e = softplus_fwd(x)
            ctx.save_for_backward(e)
            return y

        @staticmethod
        def backward(ctx, dy):
            return softplus_bwd(ctx.saved_tensors[0], dy)

    class Swish(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return swish_fwd(x)

        @staticmethod
        def backward(ctx, dy):
            return swish_bwd(ctx.saved_tensors[0], dy)

    class Three(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            ctx.save_for_backward(a, b, c)
            return three_fwd(a, b, c)

        @staticmethod
        def backward(ctx, du, dv):
            return three_bwd(*ctx.saved_tensors, du, dv)

    return {"softplus": Softplus.apply, "swish": Swish.apply, "three": Three.apply}


# --- the native mechanisms with the backends' own ops (no keras.ops dispatch) -----------------
def _raw_math(xp):
    """The four formulas above, written with the array module `xp` (jax.numpy, tf.math-like
    namespace, torch)."""

    def softplus_fwd_raw(x):
        e = xp.exp(x)
        return xp.log1p(e), e

    def swish_bwd_raw(x, dy):
        s = xp.sigmoid(x)
        return dy * (s * (1.0 + x * (1.0 - s)))

    return {
        "softplus_fwd": softplus_fwd_raw,
        "softplus_bwd": lambda e, dy: dy - dy / (1.0 + e),
        "swish_fwd": lambda x: x * xp.sigmoid(x),
        "swish_bwd": swish_bwd_raw,
        "three_fwd": lambda a, b, c: (a * b + c, xp.sin(a) * c),
        "three_bwd": lambda a, b, c, du, dv: (du * b + dv * xp.cos(a) * c, du * a,
                                              du + dv * xp.sin(a)),
    }


def _native_raw_jax():
    import jax

    class _Jnp:  # jax.numpy has no sigmoid; jax.nn has
        exp, log1p, sin, cos = jax.numpy.exp, jax.numpy.log1p, jax.numpy.sin, jax.numpy.cos
        sigmoid = staticmethod(jax.nn.sigmoid)

    m = _raw_math(_Jnp)
    softplus = jax.custom_vjp(lambda x: m["softplus_fwd"](x)[0])
    softplus.defvjp(m["softplus_fwd"], lambda e, dy: (m["softplus_bwd"](e, dy),))
    swish = jax.custom_vjp(m["swish_fwd"])
    swish.defvjp(lambda x: (m["swish_fwd"](x), x), lambda x, dy: (m["swish_bwd"](x, dy),))
    three = jax.custom_vjp(m["three_fwd"])
    three.defvjp(lambda a, b, c: (m["three_fwd"](a, b, c), (a, b, c)),
                 lambda r, g: m["three_bwd"](*r, *g))
    return {"softplus": softplus, "swish": swish, "three": three}


def _native_raw_tensorflow():
    import tensorflow as tf

    m = _raw_math(tf.math)

    @tf.custom_gradient
    def softplus(x):
        y, e = m["softplus_fwd"](x)
        return y, lambda dy: m["softplus_bwd"](e, dy)

    @tf.custom_gradient
    def swish(x):
        return m["swish_fwd"](x), lambda dy: m["swish_bwd"](x, dy)

    @tf.custom_gradient
    def three(a, b, c):
        return m["three_fwd"](a, b, c), lambda du, dv: m["three_bwd"](a, b, c, du, dv)

    return {"softplus": softplus, "swish": swish, "three": three}


def _native_raw_torch():
    import torch

    m = _raw_math(torch)

    class Softplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y, e = m["softplus_fwd"](x)
            ctx.save_for_backward(e)
            return y

        @staticmethod
        def backward(ctx, dy):
            return m["softplus_bwd"](ctx.saved_tensors[0], dy)

    class Swish(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return m["swish_fwd"](x)

        @staticmethod
        def backward(ctx, dy):
            return m["swish_bwd"](ctx.saved_tensors[0], dy)

    class Three(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            ctx.save_for_backward(a, b, c)
            return m["three_fwd"](a, b, c)

        @staticmethod
        def backward(ctx, du, dv):
            return m["three_bwd"](*ctx.saved_tensors, du, dv)

    return {"softplus": Softplus.apply, "swish": Swish.apply, "three": Three.apply}


def floor_attach():
    """The design floor's link: `attach(backward, outputs, *inputs)` returns the (detached)
    outputs attached to the inputs by an autograd.Function whose backward is `backward`."""
    import torch

    class Attach(torch.autograd.Function):
        @staticmethod
        def forward(ctx, backward, outputs, *inputs):
            ctx.backward = backward
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *cotangents):
            return (None, None) + tuple(ctx.backward(cotangents))

    # Function.apply minus its argument binding, as customgrad calls it
    return super(torch.autograd.Function, Attach).apply


def _floor_torch():
    attach = floor_attach()

    def softplus(x):
        y, e = softplus_fwd(x)
        return attach(lambda c: (softplus_bwd(e, c[0]),), [y.detach()], x)[0]

    def swish(x):
        return attach(lambda c: (swish_bwd(x, c[0]),), [swish_fwd(x).detach()], x)[0]

    def three(a, b, c):
        u, v = three_fwd(a, b, c)
        return attach(lambda g: three_bwd(a, b, c, *g), [u.detach(), v.detach()], a, b, c)

    return {"softplus": softplus, "swish": swish, "three": three}


def implementations():
    """{kind: {function name: callable}} for the active backend."""
    native = {"jax": _native_jax, "tensorflow": _native_tensorflow, "torch": _native_torch}
    raw = {"jax": _native_raw_jax, "tensorflow": _native_raw_tensorflow,
           "torch": _native_raw_torch}
    return {
        "autodiff": {"softplus": lambda x: softplus_fwd(x)[0], "swish": swish_fwd,
                     "three": three_fwd},
        "native": native[BACKEND](),
        "native_raw": raw[BACKEND](),
        "keras": _with_custom_gradient(ops.custom_gradient, _agnostic),
        "customgrad": _with_custom_gradient(customgrad.custom_gradient, _plain),
        **({"floor": _floor_torch()} if BACKEND == "torch" else {}),
    }


N_INPUTS = {"softplus": 1, "swish": 1, "three": 3}


def remat_layer(x):
    """One layer of the remat row: a wide elementwise block whose intermediates plain autodiff
    keeps for the backward (customgrad.remat keeps its input and recomputes them)."""
    h = ops.tanh(x)
    h = h * ops.sigmoid(h)
    h = ops.sin(h) * ops.cos(h)
    return ops.tanh(h + x)


def remat_implementations():
    """{kind: layer} for the remat row: the layer as it is, and wrapped in customgrad.remat."""
    return {"plain": remat_layer, "remat": customgrad.remat(remat_layer)}


def loss_of(fn):
    """A scalar loss: the sum of every output."""

    def loss(*args):
        out = fn(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return sum(ops.sum(o) for o in outs)

    return loss


def tape_gradient(loss):
    """TensorFlow: xs -> gradients of the scalar loss(*xs), through a GradientTape."""
    import tensorflow as tf

    def g(*xs):
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = loss(*xs)
        return tape.gradient(y, list(xs))

    return g


def grad_step(fn, n_inputs, compiled=False):
    """forward + backward of loss_of(fn), with the backend's own autodiff (and compiler)."""
    loss = loss_of(fn)
    argnums = tuple(range(n_inputs))
    if BACKEND == "jax":
        import jax

        g = jax.grad(loss, argnums=argnums)
        if compiled:
            g = jax.jit(g)
        return lambda *xs: jax.block_until_ready(g(*xs))
    if BACKEND == "tensorflow":
        import tensorflow as tf

        g = tape_gradient(loss)
        if compiled:
            g = tf.function(g, jit_compile=True)
        return lambda *xs: [t.numpy() for t in g(*xs)] if compiled else g(*xs)
    import torch

    if compiled:
        # one compiled graph per implementation and function (12 in all, over the default of 8)
        torch._dynamo.config.recompile_limit = 64
        # the loss compiled, its backward (AOT-compiled with it) taken outside, as a training
        # step does: torch.autograd.grad inside the compiled function is a graph break, which
        # torch 2.15 handles by recompiling the whole step on every call
        loss = torch.compile(loss)

    def g(*xs):
        xs = [x.detach().requires_grad_(True) for x in xs]
        return torch.autograd.grad(loss(*xs), xs)
    if torch.cuda.is_available():  # time the work, not the launch
        def synced(*xs, g=g):
            out = g(*xs)
            torch.cuda.synchronize()
            return out

        return synced
    return g


def forward_holding_graph(fn, n_inputs):
    """Runs the forward and returns what a training step holds until its backward: the outputs
    plus the graph (torch), the tape (tensorflow) or the VJP closure with its residuals (jax)."""
    loss = loss_of(fn)
    if BACKEND == "jax":
        import jax

        def run(*xs):
            y, vjp_fn = jax.vjp(loss, *xs)
            return jax.block_until_ready(y), vjp_fn

        return run
    if BACKEND == "tensorflow":
        import tensorflow as tf

        def run(*xs):
            tape = tf.GradientTape()
            with tape:
                for x in xs:
                    tape.watch(x)
                y = loss(*xs)
            return y, tape

        return run
    import torch

    def run(*xs):
        xs = [x.detach().requires_grad_(True) for x in xs]
        y = loss(*xs)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return y, xs

    return run
