"""tf.RaggedTensor and tf.SparseTensor arguments and outputs on the tensorflow backend, side by side
with tf.custom_gradient; tf.IndexedSlices as an upstream gradient and as a returned gradient.

jax and torch have no such tensors: there a TensorFlow tensor is a foreign framework's tensor, a
case of its own, so these tests run on tensorflow only."""

import numpy as np
import pytest
from helpers import BACKEND

import customgrad
from customgrad import CustomGradientError, GradFnResultError

pytestmark = [pytest.mark.autodiff, pytest.mark.backends("tensorflow")]

if BACKEND == "tensorflow":
    import tensorflow as tf

MODES = ["eager", "tf.function"]


def ragged():
    return tf.ragged.constant([[1.0, 2.0, 3.0], [], [4.0, 5.0]])


def sparse():
    return tf.SparseTensor([[0, 0], [1, 2], [2, 1]], [1.0, 2.0, 3.0], [3, 3])


def both(fn):
    """The same undecorated function under customgrad and under tf.custom_gradient."""
    return {"customgrad": customgrad.custom_gradient(fn), "tf": tf.custom_gradient(fn)}


def run(mode, body, *args):
    """body(*args) eagerly, or traced by tf.function (args become graph inputs; "jit_compile":
    compiled by XLA too)."""
    if mode == "eager":
        return body(*args)
    return tf.function(body, jit_compile=mode == "jit_compile")(*args)


def tape_grads(loss, sources, args):
    """The gradient of loss(*args) with respect to each of `sources` (tensors among args, or
    their components), under one GradientTape."""
    with tf.GradientTape() as tape:
        for s in sources:
            tape.watch(s.flat_values if isinstance(s, tf.RaggedTensor) else s)
        value = loss(*args)
    return tape.gradient(value, sources)


def raises(mode, match, at_run=False, kind=CustomGradientError):
    """The error of class `kind` (a CustomGradientError) expected in eager mode. Under
    tf.function, one found while tracing is re-raised by autograph as one of its class with its
    trace and the same message; one found only when the graph runs (`at_run`: sizes, row splits,
    indices) is an InvalidArgumentError saying it."""
    if mode == "eager":
        return pytest.raises(kind, match=match)
    if at_run:
        return pytest.raises(tf.errors.InvalidArgumentError, match=match.replace("'", ""))
    return pytest.raises(kind, match=f"{kind.__name__}: .*" + match)


def values_of(x):
    if isinstance(x, tf.RaggedTensor):
        return x.flat_values.numpy()
    if isinstance(x, tf.SparseTensor):
        return x.values.numpy()
    return np.asarray(x)


# -- ragged ---------------------------------------------------------------------------------


UPSTREAM_TYPES = []  # what grad_fn received, in order


def square_with_doubled_grad(x):
    """x**2 whose gradient is 4x (twice the true one): the custom one is visibly used."""

    def grad(dy):
        UPSTREAM_TYPES.append(type(dy).__name__)
        return dy * x * 4.0

    return x * x, grad


@pytest.mark.parametrize("mode", MODES)
def test_ragged_argument_and_output_as_tf_custom_gradient(mode):
    weights = tf.ragged.constant([[1.0, 2.0, 3.0], [], [4.0, 5.0]])
    results = {}
    for name, f in both(square_with_doubled_grad).items():

        def body(rt):
            y = f(rt)
            assert isinstance(y, tf.RaggedTensor)
            (g,) = tape_grads(lambda rt: tf.reduce_sum(f(rt) * weights), [rt], (rt,))
            return g, y

        UPSTREAM_TYPES.clear()
        g, y = run(mode, body, ragged())
        assert UPSTREAM_TYPES == ["RaggedTensor"], name
        assert isinstance(g, tf.RaggedTensor), name
        results[name] = (g.to_list(), y.to_list())
    assert results["customgrad"] == results["tf"]
    g, y = results["customgrad"]
    assert y == [[1.0, 4.0, 9.0], [], [16.0, 25.0]]
    assert g == [[4.0, 16.0, 36.0], [], [64.0, 100.0]]  # weights * 4x


def test_ragged_under_jit_compile_as_tf():
    """XLA compiles few ragged ops; a plain sum of a ragged output compiles, with both."""
    results = {}
    for name, f in both(square_with_doubled_grad).items():

        def body(rt):
            return tape_grads(lambda rt: tf.reduce_sum(f(rt)), [rt.flat_values], (rt,))[0]

        results[name] = run("jit_compile", body, ragged()).numpy()
    np.testing.assert_array_equal(results["customgrad"], results["tf"])
    np.testing.assert_array_equal(results["customgrad"], [4.0, 8.0, 12.0, 16.0, 20.0])


def test_second_order_through_a_ragged_custom_gradient_as_tf():
    """Nested tapes: the outer one differentiates grad_fn (4x * dy), as with tf.custom_gradient."""
    results = {}
    for name, f in both(square_with_doubled_grad).items():
        rt = ragged()
        with tf.GradientTape() as outer:
            outer.watch(rt.flat_values)
            with tf.GradientTape() as inner:
                inner.watch(rt.flat_values)
                total = tf.reduce_sum(f(rt))
            g = inner.gradient(total, rt)
            assert isinstance(g, tf.RaggedTensor)
            gg = outer.gradient(tf.reduce_sum(g * g), rt.flat_values)
        results[name] = (g.flat_values.numpy(), gg.numpy())
    np.testing.assert_array_equal(results["customgrad"][0], results["tf"][0])
    np.testing.assert_array_equal(results["customgrad"][1], results["tf"][1])
    np.testing.assert_array_equal(results["customgrad"][1], [32.0, 64.0, 96.0, 128.0, 160.0])


@pytest.mark.parametrize("mode", MODES)
def test_ragged_argument_dense_output_and_dense_argument_ragged_output(mode):
    def row_sums(rt, w):
        def grad(dy):  # dy: one per row; the gradient repeats it along each row
            row_grad = tf.gather(dy, rt.value_rowids())
            return rt.with_flat_values(row_grad * w * 2.0), tf.reduce_sum(dy * sums)

        sums = tf.reduce_sum(rt, axis=1)
        return sums * w, grad

    def split_rows(x):
        def grad(dy):
            assert isinstance(dy, tf.RaggedTensor)
            return dy.flat_values * 3.0

        return tf.RaggedTensor.from_row_lengths(x, [2, 0, 3]), grad

    results = {}
    for (name, f), g in zip(both(row_sums).items(), both(split_rows).values()):

        def body(rt, w, x):
            def loss(rt, w, x):
                return tf.reduce_sum(f(rt, w) * [1.0, 2.0, 3.0]) + tf.reduce_sum(g(x) * 2.0)

            return tape_grads(loss, [rt, w, x], (rt, w, x))

        got = run(mode, body, ragged(), tf.constant(0.5), tf.constant([1.0, 2, 3, 4, 5]))
        results[name] = [values_of(v) for v in got]
    for mine, theirs in zip(results["customgrad"], results["tf"]):
        np.testing.assert_allclose(mine, theirs)
    np.testing.assert_allclose(results["customgrad"][0], [1.0, 1, 1, 3, 3])
    np.testing.assert_allclose(results["customgrad"][1], 6.0 + 27.0)
    np.testing.assert_allclose(results["customgrad"][2], [6.0] * 5)


@pytest.mark.parametrize("mode", MODES)
def test_ragged_in_nested_arguments_with_unused_output(mode):
    seen = []

    def f(pair, scale):
        rt, x = pair

        def grad(d_rt, d_x):
            seen.append((type(d_rt).__name__, d_rt.flat_values))
            return (rt.with_flat_values(d_rt.flat_values * 10.0), d_x * 10.0), None

        return (rt * scale, x * scale), grad

    fc = customgrad.custom_gradient(f)

    def body(rt, x, s):
        return tape_grads(lambda rt, x: tf.reduce_sum(fc((rt, x), s)[1]), [rt, x], (rt, x))

    g_rt, g_x = run(mode, body, ragged(), tf.constant([1.0, 2.0]), tf.constant(2.0))
    # the ragged output is unused: its upstream is a ragged tensor of zeros
    assert seen[-1][0] == "RaggedTensor"
    if mode == "eager":
        np.testing.assert_array_equal(seen[-1][1], np.zeros(5))
    assert isinstance(g_rt, tf.RaggedTensor)
    np.testing.assert_array_equal(g_rt.flat_values, np.zeros(5))
    np.testing.assert_array_equal(g_x, [10.0, 10.0])


@pytest.mark.parametrize("mode", MODES)
def test_dense_flat_values_gradient_for_ragged_input_as_tf(mode):
    def f(rt):
        return rt * 2.0, lambda dy: dy.flat_values * 7.0

    results = {}
    for name, fn in both(f).items():

        def body(rt):
            return tape_grads(lambda rt: tf.reduce_sum(fn(rt)), [rt.flat_values], (rt,))[0]

        results[name] = run(mode, body, ragged()).numpy()
    np.testing.assert_array_equal(results["customgrad"], results["tf"])
    np.testing.assert_array_equal(results["customgrad"], [7.0] * 5)


def test_ragged_uniform_rows_and_int_ragged_and_keyword_ragged():
    uniform = tf.RaggedTensor.from_uniform_row_length(tf.constant([1.0, 2, 3, 4, 5, 6]), 3)
    assert uniform.shape.as_list() == [2, 3]
    lookup = tf.ragged.constant([[0, 1], [2]])
    seen = []

    @customgrad.custom_gradient
    def f(x, ids, offset=None):
        def grad(dy):
            seen.append(dy.shape.as_list())
            return dy * 3.0, None

        return x + tf.cast(ids.bounding_shape()[0], x.dtype) + offset.flat_values[0], grad

    offset = tf.ragged.constant([[100.0], []])
    y = f(uniform, lookup, offset=offset)
    assert isinstance(y, tf.RaggedTensor)
    np.testing.assert_array_equal(y.flat_values, [103.0, 104, 105, 106, 107, 108])
    g_x, g_ids, g_offset = tape_grads(
        lambda x, ids, off: tf.reduce_sum(f(x, ids, offset=off)),
        [uniform.flat_values, lookup.flat_values, offset.flat_values], (uniform, lookup, offset))
    assert seen == [[2, 3]]  # the upstream keeps the uniform row length
    np.testing.assert_array_equal(g_x, [3.0] * 6)
    assert g_ids is None and g_offset is None  # int: no gradient; keyword: a constant


@pytest.mark.parametrize("mode", MODES)
def test_ragged_gradient_with_other_row_splits_is_an_error(mode):
    @customgrad.custom_gradient
    def f(x):
        def grad(dy):
            return tf.ragged.constant([[1.0, 2.0], [3.0], [4.0, 5.0]])  # same size, other rows

        return x * 1.0, grad

    def body(rt):
        return tape_grads(lambda rt: tf.reduce_sum(f(rt)), [rt], (rt,))[0].flat_values

    with raises(mode, r"grad_fn `.*grad` of `.*f` returned a tf.RaggedTensor of shape \(3, None\) "
                r"and dtype float32 with another structure.* for args\[0\], a tf.RaggedTensor of "
                r"shape \(3, None\) and dtype float32; expected a tf.RaggedTensor with the row "
                r"splits of the input", at_run=True, kind=GradFnResultError):
        run(mode, body, ragged())


# what grad_fn returns for a ragged argument of shape (3, None), and how the error describes it
# in eager mode and under tf.function, where the flat values have an unknown size: what depends
# on it is found when the graph runs
MISFITS = [
    ("padded dense", lambda: tf.ones([3, 3]), r"\(a dense tensor of shape \(3, 3\)\)", None),
    ("wrong size", lambda: tf.ones([4]), r"\(a dense tensor of shape \(4,\)\)", "at run"),
    ("fewer rows", lambda: tf.ragged.constant([[1.0], [2.0]]),
     r"\(values of shape \(2,\)\)", "with another structure"),
    ("other rows", lambda: tf.ragged.constant([[1.0, 2.0], [3.0, 4.0], [5.0]]),
     "with another structure", "at run"),
    ("sparse", lambda: tf.SparseTensor([[0, 0]], [1.0], [3, 3]), "a tf.SparseTensor", None),
    ("ragged rank 2", lambda: tf.ragged.constant([[[1.0]], [], [[2.0]]]),
     "with another structure", None),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("returned, received, in_graph", [m[1:] for m in MISFITS],
                         ids=[m[0] for m in MISFITS])
def test_ragged_gradient_misfits_are_errors_naming_the_argument(mode, returned, received,
                                                                in_graph):
    @customgrad.custom_gradient
    def f(rt, x):
        return rt * x, lambda dy: (returned(), tf.reduce_sum(dy.flat_values))

    def body(rt, x):
        return tape_grads(lambda rt, x: tf.reduce_sum(f(rt, x)), [rt, x], (rt, x))[1]

    at_run = mode != "eager" and in_graph == "at run"
    if mode != "eager" and in_graph is not None:
        received = "with another structure or size" if at_run else in_graph
    with raises(mode, rf"returned .*{received}.* for args\[0\], a tf.RaggedTensor of shape "
                r"\(3, None\).*expected a tf.RaggedTensor with the row splits of the input "
                r"\(ragged_rank 1, flat values of shape \((5|None),\)\) or a dense tensor of its "
                r"flat values", at_run=at_run, kind=GradFnResultError):
        run(mode, body, ragged(), tf.constant(2.0))


def test_tf_custom_gradient_takes_a_padded_gradient_silently():
    """Why the misfit test above checks only customgrad: TensorFlow accepts a (3, 3) gradient
    for flat values of shape (5,) without a word."""
    @tf.custom_gradient
    def f(rt):
        return rt * 1.0, lambda dy: tf.ones([3, 3])

    rt = ragged()
    (g,) = tape_grads(lambda rt: tf.reduce_sum(f(rt)), [rt.flat_values], (rt,))
    assert g.shape == (3, 3)


# -- sparse ---------------------------------------------------------------------------------


def sparse_matmul(sp, w):
    """sparse @ w, with a gradient scaled by 10 (visibly custom)."""

    def grad(dy):
        rows, cols = sp.indices[:, 0], sp.indices[:, 1]
        d_values = tf.reduce_sum(tf.gather(dy, rows) * tf.gather(w, cols), axis=1)
        d_w = tf.sparse.sparse_dense_matmul(sp, dy, adjoint_a=True)
        return tf.SparseTensor(sp.indices, d_values * 10.0, sp.dense_shape), d_w * 10.0

    return tf.sparse.sparse_dense_matmul(sp, w), grad


@pytest.mark.parametrize("mode", MODES)
def test_sparse_argument_gives_a_sparse_gradient(mode):
    w = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    f = customgrad.custom_gradient(sparse_matmul)

    def body(sp, w):
        return tape_grads(lambda sp, w: tf.reduce_sum(f(sp, w)), [sp.values, w], (sp, w))

    g_values, g_w = run(mode, body, sparse(), w)
    # tf.custom_gradient refuses a SparseTensor argument; the same rule written over the values
    with pytest.raises(ValueError, match="SparseTensor is not supported"):
        with tf.GradientTape():
            tf.custom_gradient(sparse_matmul)(sparse(), w)

    def over_values(values, w):
        sp = sparse()
        out, grad = sparse_matmul(tf.SparseTensor(sp.indices, values, sp.dense_shape), w)
        return out, lambda dy: (lambda g: (g[0].values, g[1]))(grad(dy))

    ref_values, ref_w = run(mode, lambda v, w: tape_grads(
        lambda v, w: tf.reduce_sum(tf.custom_gradient(over_values)(v, w)), [v, w], (v, w)),
        sparse().values, w)
    np.testing.assert_allclose(g_values, ref_values)
    np.testing.assert_allclose(g_w, ref_w)
    np.testing.assert_allclose(g_values, [30.0, 110.0, 70.0])  # 10 * row sums of w at the cols


@pytest.mark.parametrize("mode", MODES)
def test_sparse_output_gets_a_sparse_upstream(mode):
    seen = []

    @customgrad.custom_gradient
    def scatter(x):
        def grad(dy):
            seen.append(type(dy).__name__)
            return dy.values * 2.0

        return tf.SparseTensor([[0, 1], [2, 2]], x, [3, 3]), grad

    def body(x):
        def loss(x):
            out = scatter(x)
            assert isinstance(out, tf.SparseTensor)
            return tf.sparse.reduce_sum(out * tf.constant([[1.0, 2.0, 3.0]] * 3))

        return tape_grads(loss, [x], (x,))[0]

    np.testing.assert_allclose(run(mode, body, tf.constant([1.0, 1.0])), [4.0, 6.0])
    assert seen[-1] == "SparseTensor"


@pytest.mark.parametrize("mode", MODES)
def test_sparse_gradient_with_other_indices_is_an_error(mode):
    @customgrad.custom_gradient
    def f(sp):
        def grad(dy):
            return tf.SparseTensor([[0, 0], [1, 1], [2, 2]], [1.0, 1.0, 1.0], [3, 3])

        return tf.sparse.reduce_sum(sp), grad

    def body(sp):
        return tape_grads(lambda sp: f(sp), [sp.values], (sp,))[0]

    with raises(mode, r"returned a tf.SparseTensor .* with another structure.* for args\[0\], a "
                r"tf.SparseTensor of shape \(3, 3\).*expected a tf.SparseTensor with the "
                r"indices and dense shape of the input", at_run=True, kind=GradFnResultError):
        run(mode, body, sparse())


# -- tf.IndexedSlices -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_indexed_slices_upstream_is_made_dense(mode):
    """An output read through tf.gather gets an IndexedSlices cotangent; grad_fn receives it
    dense (as on jax and torch), where tf.custom_gradient's grad_fn receives the IndexedSlices."""
    seen = {}

    def f(table):
        def grad(dy):
            seen.setdefault(name, []).append(type(dy).__name__)
            return tf.convert_to_tensor(dy) * 3.0

        return table * 1.0, grad

    table = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    results = {}
    for name, fn in both(f).items():

        def body(table):
            return tape_grads(
                lambda t: tf.reduce_sum(tf.gather(fn(t), [0, 2, 2])), [table], (table,))[0]

        results[name] = tf.convert_to_tensor(run(mode, body, table)).numpy()
    np.testing.assert_array_equal(results["customgrad"], results["tf"])
    np.testing.assert_array_equal(results["customgrad"], [[3.0, 3.0], [0.0, 0.0], [6.0, 6.0]])
    assert seen["tf"][-1] == "IndexedSlices"
    assert seen["customgrad"][-1] in ("EagerTensor", "SymbolicTensor", "Tensor")


@pytest.mark.parametrize("mode", MODES)
def test_indexed_slices_gradient_for_a_dense_input_as_tf(mode):
    def embed(table, ids):
        def grad(dy):
            shape = tf.shape(table, out_type=tf.int64)
            return tf.IndexedSlices(dy * 2.0, ids, shape), None

        return tf.gather(table, ids), grad

    table = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    results = {}
    for name, fn in both(embed).items():

        def body(table, ids):
            return tape_grads(lambda t, i: tf.reduce_sum(fn(t, i)), [table], (table, ids))[0]

        g = run(mode, body, table, tf.constant([2, 0]))
        assert isinstance(g, tf.IndexedSlices), name  # stays sparse, as with tf.custom_gradient
        results[name] = tf.convert_to_tensor(g).numpy()
    np.testing.assert_array_equal(results["customgrad"], results["tf"])
    np.testing.assert_array_equal(results["customgrad"], [[2.0, 2.0], [0.0, 0.0], [2.0, 2.0]])


def test_indexed_slices_argument_and_output_are_errors_naming_them():
    slices = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([3, 2]))

    @customgrad.custom_gradient
    def f(x, pair):
        return x * 1.0, lambda dy: (dy, None)

    with pytest.raises(CustomGradientError, match=r"an argument of `.*f` is a tf.IndexedSlices.* at "
                       r"args\[1\]\[0\].*tf.RaggedTensor or tf.SparseTensor.*tf.convert_to_tensor"):
        f(tf.ones([2]), (slices, 1.0))

    @customgrad.custom_gradient
    def g(x):
        return (x, tf.IndexedSlices(x, tf.constant([0]))), lambda dy, ds: dy

    for mode in MODES:
        with raises(mode, r"an output of `.*g` is a tf.IndexedSlices.* at output\[1\]"):
            run(mode, lambda x: g(x)[0], tf.ones([1]))


# -- customgrad.grad, value_and_grad, vjp -----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_grad_and_vjp_of_ragged_values_as_gradient_tape(mode):
    def loss(rt):
        return tf.reduce_sum(rt * rt)

    def body(rt):
        g = customgrad.grad(loss)(rt)
        value, g2 = customgrad.value_and_grad(loss)(rt)
        out, vjp_fn = customgrad.vjp(lambda rt: rt * 3.0, rt)
        (g3,) = vjp_fn(rt.with_flat_values(tf.ones([5])))
        with tf.GradientTape() as tape:
            tape.watch(rt)
            ref = tape.gradient(loss(rt), rt)
        return g, value, g2, out, g3, ref

    g, value, g2, out, g3, ref = run(mode, body, ragged())
    for r in (g, g2, g3, out):
        assert isinstance(r, tf.RaggedTensor)
    assert g.to_list() == ref.to_list() == g2.to_list() == [[2.0, 4.0, 6.0], [], [8.0, 10.0]]
    assert float(value) == 55.0
    assert g3.to_list() == [[3.0, 3.0, 3.0], [], [3.0, 3.0]]
    assert out.to_list() == [[3.0, 6.0, 9.0], [], [12.0, 15.0]]


@pytest.mark.parametrize("mode", MODES)
def test_grad_of_sparse_values_is_sparse(mode):
    w = tf.constant([[1.0], [2.0], [3.0]])

    def loss(sp):
        return tf.reduce_sum(tf.sparse.sparse_dense_matmul(sp, w))

    def body(sp):
        g = customgrad.grad(loss)(sp)
        ref = tape_grads(loss, [sp.values], (sp,))[0]  # GradientTape refuses sp itself
        return g.indices, g.values, ref

    indices, values, ref = run(mode, body, sparse())
    np.testing.assert_array_equal(indices, sparse().indices)
    np.testing.assert_array_equal(values, ref)
    np.testing.assert_array_equal(values, [1.0, 3.0, 2.0])


def test_custom_gradient_with_ragged_under_customgrad_grad():
    f = customgrad.custom_gradient(square_with_doubled_grad)
    g = customgrad.grad(lambda rt: tf.reduce_sum(f(rt)))(ragged())
    assert g.to_list() == [[4.0, 8.0, 12.0], [], [16.0, 20.0]]


def test_grad_of_indexed_slices_is_an_error():
    slices = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([3, 2]))
    with pytest.raises(TypeError, match=r"customgrad.vjp: cannot differentiate with respect to "
                       "a IndexedSlices"):
        customgrad.grad(lambda s: tf.reduce_sum(s.values))(slices)


def test_check_gradients_of_ragged_arguments_is_an_error_naming_them():
    f = customgrad.custom_gradient(square_with_doubled_grad)
    with pytest.raises(ValueError, match=r"check_gradients: args\[1\] of `.*` is a "
                       r"tf.RaggedTensor of shape \(3, None\).*finite differences need dense"):
        customgrad.check_gradients(lambda x, rt: f(rt) * x, tf.constant(1.0), ragged())
