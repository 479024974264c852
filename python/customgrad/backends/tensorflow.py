"""TensorFlow: in eager mode the call is recorded on the tapes as one operation whose backward is
grad_fn; in graphs (tf.function, also with jit_compile=True) it is built on tf.custom_gradient over
the flat tensor leaves. customgrad adds the calling convention, the structures and the checks.

A tf.RaggedTensor or tf.SparseTensor (argument or output) is one value for f and grad_fn and one
tensor for the tape: the tensor that carries its gradient (its flat values; its values), as in
tf.custom_gradient. Its structure (row partitions; indices and dense shape) is a constant that its
gradient shares.

Eager mode does not use tf.custom_gradient because its backward closure keeps the forward's
outputs alive until the tape is gone: one tensor per call more than plain autodiff holds, which
adds up over the layers of a network (a stack of 16 softplus calls peaked at 1.8x plain autodiff).
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf
from tensorflow.python import pywrap_tfe  # ... or tells whether a forward accumulator watches
from tensorflow.python.eager import record  # no public API stops recording on every tape
from tensorflow.python.framework.composite_tensor import CompositeTensor
from tensorflow.python.ops import gradients_util  # ... or tells whether a tape is nested

from .. import _forward, _messages as msg, _tree
from .._messages import CustomGradientError
from .._spec import OutputSpec
from .._variables import recording


# capabilities (see _contract.py)
HAS_AUTODIFF = True
HAS_FAST_PATH = False
FORWARD_MODE_OPT_IN = False


def tensor_value(leaf):
    if isinstance(leaf, tf.Tensor):  # eager and symbolic tensors: checked first, it is cheap
        return leaf
    if isinstance(leaf, keras.Variable):
        return tf.convert_to_tensor(leaf.value)
    if isinstance(leaf, tf.Variable):
        return tf.convert_to_tensor(leaf)
    if tf.is_tensor(leaf):
        return leaf
    return None


def is_tensor(x) -> bool:
    # tf.Tensor first: tf.is_tensor alone is slow (an isinstance check against a Protocol)
    if isinstance(x, tf.Tensor):
        return True
    if isinstance(x, CompositeTensor):
        # other composites (tf.IndexedSlices, extension types) are refused by name in `call`
        return isinstance(x, (tf.RaggedTensor, tf.SparseTensor))
    return tf.is_tensor(x)


def is_float(x) -> bool:
    return x.dtype.is_floating or x.dtype.is_complex


def sees_closures() -> bool:
    return True  # f's closure cells can be read while a call runs


def being_differentiated(x, closed_over=False) -> bool:
    """Whether a gradient tape watches tensor `x` (variables are found by the tape's variable
    watching, not here)."""
    return isinstance(x, tf.Tensor) and pywrap_tfe.TFE_Py_TapeSetShouldRecordBackprop([x])


def spec(x):
    if not isinstance(x, tf.Tensor):
        if isinstance(x, tf.RaggedTensor):
            return RaggedSpec(x)
        if isinstance(x, tf.SparseTensor):
            return SparseSpec(x)
    shape, dtype = x.shape, x.dtype
    dims = tuple(shape.as_list()) if shape.rank is not None else ()
    # under tf.function shapes may be partly unknown: keep the (small) runtime shape then
    runtime = None if shape.is_fully_defined() else tf.shape(x)
    return OutputSpec(dims, dtype, None, dtype.is_floating or dtype.is_complex, runtime)


def zeros(spec):
    if isinstance(spec, _CompositeSpec):
        return spec.rebuild(zeros(spec.values))
    shape = spec.shape if spec.runtime_shape is None else spec.runtime_shape
    return tf.zeros(shape, dtype=spec.dtype)


def convert(grad, like):
    if isinstance(grad, keras.Variable):
        grad = grad.value
    if tf.is_tensor(grad):
        return grad
    return tf.convert_to_tensor(grad, dtype=like.dtype)


def static_shape(x) -> tuple:
    if isinstance(x, OutputSpec):
        return x.shape
    shape = x.shape
    return tuple(shape.as_list()) if shape.rank is not None else ()


def cast_like(grad, like):
    if grad.dtype != like.dtype:
        grad = tf.cast(grad, like.dtype)
    return grad


# -- tf.RaggedTensor and tf.SparseTensor -------------------------------------------------------

def _component(x):
    """The tensor that carries the gradient of `x`: a ragged tensor's flat values, a sparse
    tensor's values, `x` itself for anything else."""
    if isinstance(x, tf.Tensor):
        return x
    if isinstance(x, tf.RaggedTensor):
        return x.flat_values
    if isinstance(x, tf.SparseTensor):
        return x.values
    return x


def _with_component(like, component):
    """`like` (a value or a spec) rebuilt around `component`; `component` when `like` is dense."""
    if isinstance(like, _CompositeSpec):
        return like.rebuild(component)
    if isinstance(like, tf.RaggedTensor):
        return like.with_flat_values(component)
    if isinstance(like, tf.SparseTensor):
        return tf.SparseTensor(like.indices, component, like.dense_shape)
    return component


def _has_composite(values) -> bool:
    for v in values:
        if not isinstance(v, tf.Tensor) and isinstance(v, CompositeTensor):
            return True
    return False


_SUPPORTED = "tf.Tensor, tf.Variable, keras.Variable, tf.RaggedTensor or tf.SparseTensor"


def _refuse_other_composites(f, leaves, structure, name, what):
    """A CustomGradientError for the first composite tensor among `leaves` that is neither
    ragged nor sparse: TensorFlow has no gradient rule customgrad could follow for it."""
    for path, leaf in zip(_tree.leaf_paths(structure, name), leaves):
        if isinstance(leaf, CompositeTensor) and not isinstance(
                leaf, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
            hint = (" (tf.convert_to_tensor makes it dense)"
                    if isinstance(leaf, tf.IndexedSlices) else "")
            raise msg.tf_composite_refused(what, f, leaf, path, _SUPPORTED, hint)


def _refuse_other_composite_args(arguments):
    args, kwargs = arguments.structure
    _refuse_other_composites(arguments.f, _tree.flatten(args), args, "args", "an argument of")
    _refuse_other_composites(arguments.f, _tree.flatten(kwargs), kwargs, "kwargs",
                             "a keyword argument of")


def _refuse_other_composite_outputs(f, output, out_leaves):
    for o in out_leaves:
        if not isinstance(o, tf.Tensor) and isinstance(o, CompositeTensor):
            _refuse_other_composites(f, out_leaves, output, "output", "an output of")
            return


def _upstream_leaves(backward, cotangents):
    """The tape's cotangents (one per output tensor) as grad_fn's upstream leaves: ragged and
    sparse outputs get ragged and sparse upstreams; a tf.IndexedSlices (an output read through
    tf.gather) is made dense, as upstreams are on every backend."""
    leaves = []
    for s, ct in zip(backward.output_specs, cotangents):
        composite = isinstance(s, _CompositeSpec)
        if isinstance(ct, tf.IndexedSlices):
            ct = _dense(ct, s.values if composite else s)
        if composite and ct is not None:
            ct = s.rebuild(ct)
        leaves.append(ct)
    return leaves


def _dense(slices, spec):
    rows = spec.shape[0] if spec.runtime_shape is None else spec.runtime_shape[0]
    return tf.math.unsorted_segment_sum(slices.values, slices.indices, rows)


class _CompositeSpec(OutputSpec):
    """The spec of a ragged or sparse tensor: its own shape and dtype, the spec of the tensor that
    carries its gradient (`values`), and the integer tensors that give its structure, which its
    gradient must share (`structure`)."""

    __slots__ = ("values", "structure")

    composite_type: type  # tf.RaggedTensor or tf.SparseTensor

    def __init__(self, x, values):
        super().__init__(_dims(x.shape), x.dtype, None, is_float(values))
        self.values = spec(values)

    def check_gradient(self, grad, who: str, where: str):
        """What `who` (grad_fn) returned for this input (`where`), rebuilt on the input's
        structure; a CustomGradientError when it does not fit. In a graph, what is known only
        when it runs (sizes, row splits, indices) is compared then: an InvalidArgumentError with
        the same message."""

        def misfit(detail=""):
            return msg.composite_misfit(who, grad, detail, where, self, self.expected())

        if isinstance(grad, self.composite_type):
            structure = self.structure_of(grad)
            if structure is None:
                raise CustomGradientError(misfit(" with another structure"))
            values = _component(grad)
        elif isinstance(grad, tf.Tensor):
            structure, values = (), grad
        else:
            raise CustomGradientError(misfit())
        if not _compatible(values.shape, self.values.shape):
            what = "values" if structure else "a dense tensor"
            raise CustomGradientError(misfit(f" ({what} of shape {_dims(values.shape)})"))
        must_equal = []
        if self.values.runtime_shape is not None:
            must_equal.append((self.values.runtime_shape, tf.shape(values)))
        for mine, theirs in zip(self.structure, structure):
            if mine is not theirs:  # the same tensor: the common case, grad_fn kept dy's
                if not _compatible(theirs.shape, mine.shape):
                    raise CustomGradientError(misfit(" with another structure"))
                must_equal.append((mine, theirs))
        if must_equal:
            values = _when_equal(must_equal, values, misfit(" with another structure or size"))
        return self.rebuild(cast_like(values, self.values))


class RaggedSpec(_CompositeSpec):
    __slots__ = ("partitions",)
    describe_as = "tf.RaggedTensor"
    composite_type = tf.RaggedTensor

    def __init__(self, x):
        super().__init__(x, x.flat_values)
        # the partitions themselves (private): rebuilding from row splits alone would lose
        # uniform row lengths, which the static shape shows
        self.partitions = x._nested_row_partitions
        self.structure = tuple(p.row_splits() for p in self.partitions)

    def rebuild(self, values):
        return tf.RaggedTensor._from_nested_row_partitions(values, self.partitions, validate=False)

    def structure_of(self, grad):
        if grad.ragged_rank != len(self.partitions):
            return None
        return grad.nested_row_splits

    def expected(self):
        return (f"a tf.RaggedTensor with the row splits of the input (ragged_rank "
                f"{len(self.partitions)}, flat values of shape {tuple(self.values.shape)}) or a "
                f"dense tensor of its flat values")


class SparseSpec(_CompositeSpec):
    __slots__ = ()
    describe_as = "tf.SparseTensor"
    composite_type = tf.SparseTensor

    def __init__(self, x):
        super().__init__(x, x.values)
        self.structure = (x.indices, x.dense_shape)

    def rebuild(self, values):
        indices, dense_shape = self.structure
        return tf.SparseTensor(indices, values, dense_shape)

    def structure_of(self, grad):
        return (grad.indices, grad.dense_shape)

    def expected(self):
        return (f"a tf.SparseTensor with the indices and dense shape of the input "
                f"{tuple(self.shape)} (values of shape {tuple(self.values.shape)}) or a dense "
                f"tensor shaped as its values")


def _compatible(shape, dims) -> bool:
    """Whether a TensorShape and a tuple of dims (None: unknown) can describe the same tensor."""
    if shape.rank is None:
        return True
    got = shape.as_list()
    return len(got) == len(dims) and all(
        a is None or b is None or a == b for a, b in zip(got, dims))


def _dims(shape) -> tuple:
    return tuple(shape.as_list()) if shape.rank is not None else ()


def _when_equal(pairs, values, message):
    """`values`, once each pair of integer tensors is equal: compared now in eager mode, when the
    graph runs otherwise."""
    if tf.executing_eagerly():
        for mine, theirs in pairs:
            if mine.shape != theirs.shape or not bool(tf.reduce_all(tf.equal(mine, theirs))):
                raise CustomGradientError(message)
        return values
    # apostrophes would reach the InvalidArgumentError escaped
    message = message.replace("'", "")
    same_shapes = [tf.debugging.assert_equal(tf.shape(mine), tf.shape(theirs), message=message)
                   for mine, theirs in pairs]
    with tf.control_dependencies(same_shapes):
        same = [tf.debugging.assert_equal(mine, theirs, message=message) for mine, theirs in pairs]
    with tf.control_dependencies(same):
        return tf.identity(values)


def _variables_read(rec, watcher, arguments, tf_variables=False) -> tuple[list, list]:
    """The variables f read, without duplicates, and their raw values: the trainable
    floating-point keras.Variables Keras recorded (`rec`), in the order of their first read, then
    the trainable floating-point tf.Variables (a tf.Module's, or any other) TensorFlow's variable
    watcher saw, as tf.custom_gradient finds them. A tf.Variable's raw value is itself, and a
    tf.Variable passed to f as an argument is no hidden read. grad_fn gets the variables as they
    are: a keras.Variable, not the tf.Variable it holds (see `_backward`), unless `tf_variables`:
    then the variables are the raw values, the tf.Variables tf.custom_gradient passes.

    >>> import tensorflow as tf
    >>> v = tf.Variable(2.0)
    >>> with record.VariableWatcher() as watcher, recording() as rec:
    ...     _ = v * 3.0
    >>> _variables_read(rec, watcher, ())[0] == [v]
    True
    """
    watched = watcher.watched_variables()
    if not watched:
        return rec.raw_values if tf_variables else rec.variables, rec.raw_values
    variables, values = list(rec.variables), list(rec.raw_values)
    # a keras.Variable's raw value is the tf.Variable TensorFlow watched
    known = {id(v) for v in values}
    known.update(id(leaf) for leaf in arguments)
    for v in watched:  # TensorFlow watches trainable variables only
        if id(v) not in known and (v.dtype.is_floating or v.dtype.is_complex):
            known.add(id(v))
            variables.append(v)
            values.append(v)
    return values if tf_variables else variables, values


def call(arguments):
    return _call(arguments, tf_variables=False)


def call_with_tf_variables(arguments):
    """`call` for a function decorated with `tf_variables=True`: grad_fn's `variables=` holds
    the tf.Variables f read (a keras.Variable's `.value`), as tf.custom_gradient passes them."""
    return _call(arguments, tf_variables=True)


def _call(arguments, tf_variables):
    tape_inputs = arguments.tensor_values
    composite_inputs = _has_composite(tape_inputs)
    if composite_inputs:
        _refuse_other_composite_args(arguments)
        tape_inputs = [_component(v) for v in tape_inputs]
    # When a single non-persistent tape watches the inputs, nothing will ever differentiate
    # grad_fn, so the tape need not keep f's intermediates (tf.custom_gradient records them all:
    # 1.25x the memory of plain autodiff for a recomputing swish): f then runs on `_unwatched`
    # copies of the inputs. Under nested or persistent tapes f runs on the inputs themselves and
    # its intermediates stay recorded, so second derivatives through grad_fn's closure stay
    # correct.
    gradient_types = gradients_util.PossibleTapeGradientTypes(tape_inputs)
    first_order_only = gradient_types == gradients_util.POSSIBLE_GRADIENT_TYPES_FIRST_ORDER
    if tf.executing_eagerly():
        return _call_eager(arguments, tape_inputs, first_order_only, tf_variables)
    if _has_tangents(tape_inputs):
        if composite_inputs:
            raise msg.tf_composite_forward_mode(arguments.f)
        return _call_graph_forward_mode(arguments, tf_variables)
    values = arguments.tensor_values
    captured = {}  # the Backward, for the output's structure

    @tf.custom_gradient
    def forward(*tensors):
        if first_order_only:
            tensors = _unwatched(tensors)
        if composite_inputs:
            tensors = [_with_component(v, t) for v, t in zip(values, tensors)]
        with record.VariableWatcher() as watcher, recording() as rec:
            output, out_leaves, backward = arguments.forward(tensors)
        _refuse_other_composite_outputs(arguments.f, output, out_leaves)
        if rec.losses_added and gradient_types != gradients_util.POSSIBLE_GRADIENT_TYPES_NONE:
            raise _loss_error(arguments.f)
        out_leaves = [tf.convert_to_tensor(_component(o)) for o in out_leaves]
        variables, var_values = _variables_read(rec, watcher, arguments.leaves, tf_variables)
        captured["backward"] = backward

        def backward_fn(cotangents, wanted):
            return _backward(backward, _upstream_leaves(backward, cotangents), variables,
                             var_values, wanted)

        return out_leaves, _tf_grad_fn(backward_fn, len(tape_inputs))

    try:
        outputs = forward(*tape_inputs)
    except TypeError as error:
        # tf.custom_gradient refuses reference (TF1, non-resource) variables in f's graph with a
        # TypeError that names only its own decorator
        if "ResourceVariable" not in str(error):
            raise
        raise msg.tf_reference_variable(arguments.f) from error
    backward = captured["backward"]
    return backward.rebuild([_with_component(s, o)
                             for s, o in zip(backward.output_specs, outputs)])


def _unwatched(tensors) -> list:
    """The tensors (flat components), as new tensors of the same buffers (nothing is copied)
    that no tape or accumulator watches.

    f runs on them where nothing will differentiate its intermediates: the tapes that watch the
    call's inputs do not record f's operations on them, while a tape f opens itself and watches
    them with records them as it does under tf.custom_gradient. (Stopping all recording while f
    runs would silence that tape too: TensorFlow stops every tape on the thread at once, and has
    no API that lists the tapes to stop only those.) Variables f reads are still seen by the
    tapes that watch accessed variables, as under tf.custom_gradient; what they record of f is
    dropped when f's tensors go, and never reaches the gradient, which comes from grad_fn.
    """
    if tf.executing_eagerly():
        # a new handle on the same device shares the buffer; unlike tf.identity (an op, six
        # times the cost) it is recorded nowhere
        return [t._copy_nograd(device_name=t.device) for t in tensors]
    with record.stop_recording():
        return [tf.identity(t) for t in tensors]


def _backward(backward, cotangents, variables, var_values, wanted):
    """grad_fn's call: the gradients (flat components) of every tensor leaf of the arguments,
    then those of `wanted` (variable values).

    `variables` holds the keras.Variables f read as they are, the objects a backend-agnostic
    grad_fn compares with its layer's own (`variables == [self.kernel]`), where
    tf.custom_gradient passes the tf.Variables they hold, the objects TensorFlow's APIs take
    (GradientTape.watch, `.ref()` compared with `tape.watched_variables()`). No object is both,
    and nothing tells which kind of code a grad_fn is: code written for tf.custom_gradient
    opts in (`custom_gradient(f, tf_variables=True)`: `variables` holds the tf.Variables); if
    it did not, and trips on a keras.Variable, it gets a CustomGradientError that says so,
    caused by the original error.
    """
    try:
        grads = backward.linked(cotangents, None, range(len(backward.input_specs)), variables,
                                var_values, wanted)
    except (TypeError, AttributeError, ValueError) as error:
        names = [v.path for v in variables if isinstance(v, keras.Variable)]
        # Python's and TensorFlow's words for a keras.Variable where a tf.Variable was expected
        if names and "'Variable'" in str(error) and not isinstance(error, CustomGradientError):
            raise msg.tf_keras_variables_in_grad_fn(backward.f, error, names) from error
        raise
    return [_component(g) for g in grads]


def _tf_grad_fn(backward_fn, n_inputs):
    """The grad function handed to tf.custom_gradient: `backward_fn(cotangents, wanted)` returns
    the gradients of the `n_inputs` inputs, then those of the variables `wanted`."""

    def grad(*cts, variables=None):
        # TensorFlow passes `variables` when its own watcher saw any, integer ones included;
        # those are not among what f read for grad_fn, and get no gradient
        grads = backward_fn(cts, variables or ())
        if variables is None:
            return grads
        return grads[:n_inputs], grads[n_inputs:]

    return grad


def _call_eager(arguments, tape_inputs, first_order_only, tf_variables):
    """Runs f, then records one operation (inputs and read variables -> outputs) on every active
    tape; its backward calls grad_fn. Nothing but grad_fn's closure and the specs is kept."""
    f = arguments.f
    if not record.could_possibly_record():  # no tape: nothing to record, no variable to find
        output, out_leaves = arguments.output(arguments.tensor_values)
        _refuse_other_composite_outputs(f, output, out_leaves)
        return output
    values = arguments.tensor_values
    if first_order_only:
        values = [_with_component(v, t) for v, t in zip(values, _unwatched(tape_inputs))]
    with record.VariableWatcher() as watcher, recording() as rec:
        output, out_leaves, backward = arguments.forward(values)
    _refuse_other_composite_outputs(f, output, out_leaves)
    if _has_tangents(tape_inputs):
        _check_linear(backward, out_leaves, concrete=True)
    if rec.losses_added and first_order_only:
        raise _loss_error(f)
    variables, var_values = _variables_read(rec, watcher, arguments.leaves, tf_variables)
    if not arguments.tensor_values and not variables:
        return output  # nothing to differentiate: f's ops stay recorded as they ran
    with record.stop_recording():
        # new tensors (no copy): an output that is an input, or a tensor some tape already
        # knows, must not get a second producer on the tape
        outputs = [tf.identity(_component(o)) for o in out_leaves]
    result_leaves = [_with_component(o, t) for o, t in zip(out_leaves, outputs)]
    del output, out_leaves
    # reading a variable records the read (handle -> value), which connects its gradient
    inputs = list(tape_inputs) + [tf.convert_to_tensor(v) for v in var_values]

    def backward_fn(*cotangents):
        return _backward(backward, _upstream_leaves(backward, cotangents), variables, var_values,
                         var_values)

    record.record_operation(f"customgrad_{msg.fn_name(f)}", outputs, inputs, backward_fn)
    return backward.rebuild(result_leaves)


def _has_tangents(tensors) -> bool:
    """Whether a tf.autodiff.ForwardAccumulator watches one of `tensors`."""
    return bool(pywrap_tfe.TFE_Py_PackJVPs(list(tensors))[1])


def _check_linear(backward, out_leaves, concrete):
    """Forward mode is derived from grad_fn: refuses a grad_fn that is not linear in upstream
    (marked, or, on concrete values, failing the probe)."""
    float_outputs = [o for o in out_leaves if tf.is_tensor(o) and is_float(o)]
    rule = None
    if concrete and len(float_outputs) == len(out_leaves) and all(
            o.dtype.is_floating and o.shape.is_fully_defined() for o in float_outputs):
        def rule(us):
            with record.stop_recording():
                grads = backward([tf.constant(u, o.dtype) for u, o in zip(us, float_outputs)])[0]
            return [None if g is None else g.numpy() for g in grads]
    _forward.check_linear(backward.f, backward.grad_fn, rule,
                          [tuple(o.shape) for o in float_outputs])


def _call_graph_forward_mode(arguments, tf_variables):
    """A call inside a tf.function under a tf.autodiff.ForwardAccumulator opened there.

    The accumulator would see tf.custom_gradient's IdentityN, not grad_fn: its JVP would be f's
    own derivative (NaN for log1pexp at 100) or zero. The outputs of tf.custom_gradient go
    through one more identity, which is recorded (inputs -> outputs) with grad_fn as its
    backward: the accumulator transposes it into the JVP, as it does in eager mode, and a tape
    inside the function uses grad_fn. The graph itself still carries tf.custom_gradient's
    gradient, for a tape outside the tf.function.
    """
    captured = {}

    @tf.custom_gradient
    def forward(*tensors):
        with record.VariableWatcher() as watcher, recording() as rec:
            _, out_leaves, backward = arguments.forward(tensors)
        if rec.losses_added:
            raise _loss_error(arguments.f)
        out_leaves = [tf.convert_to_tensor(o) for o in out_leaves]
        variables, var_values = _variables_read(rec, watcher, arguments.leaves, tf_variables)
        captured.update(backward=backward, variables=variables, var_values=var_values,
                        out_leaves=out_leaves)

        def backward_fn(cotangents, wanted):
            return _backward(backward, cotangents, variables, var_values, wanted)

        return out_leaves, _tf_grad_fn(backward_fn, len(tensors))

    results = forward(*arguments.tensor_values)
    backward = captured["backward"]
    _check_linear(backward, captured["out_leaves"], concrete=False)
    variables, var_values = captured["variables"], captured["var_values"]
    with record.stop_recording():
        outputs = [tf.identity(o) for o in results]
    inputs = list(arguments.tensor_values) + [tf.convert_to_tensor(v) for v in var_values]

    def backward_fn(*cotangents):
        return _backward(backward, cotangents, variables, var_values, var_values)

    record.record_operation(f"customgrad_{msg.fn_name(arguments.f)}", outputs, inputs,
                            backward_fn)
    return backward.rebuild(outputs)


def _loss_error(f):
    # f ran on unwatched copies of the inputs (or inside tf.custom_gradient's graph function): a
    # loss it added has no path to the inputs, so its gradient would be silently zero
    return msg.loss_in_forward(
        f, "on tensorflow the ops of f are not recorded for the gradient tape that watches "
        "it, so that loss would get no gradient")


def ones_like(x):
    return tf.ones_like(x)


def recomputation_inputs(leaves):
    return list(leaves)  # the recomputation's tape watches its own inputs: nothing to cut


def vjp_flat(fn, values, reusable=True):
    """Runs fn(*values) -> output leaves under a tape; returns (outputs, back(cotangents)).

    The tape is persistent only when back may run more than once: under a persistent (or nested)
    tape TensorFlow drops custom gradients, tf.custom_gradient's too, of calls inside
    tf.cond/tf.while_loop branches of a tf.function and inside a tf.function called under it.
    A ragged or sparse value is differentiated through its (flat) values, and its gradient is
    ragged or sparse, with its structure.
    """
    for v in values:
        if isinstance(v, CompositeTensor) and not isinstance(
                v, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
            raise msg.tf_vjp_composite(v, _SUPPORTED)
    sources = [_component(v) for v in values]
    with tf.GradientTape(persistent=reusable) as tape:
        for v in sources:
            tape.watch(v)
        outputs = fn(*values)

    def backward(cotangents):
        pairs = [
            (_component(o), tf.zeros_like(_component(o)) if ct is None
             else tf.cast(_component(ct), o.dtype))
            for o, ct in zip(outputs, cotangents)
            if tf.is_tensor(o) and is_float(o)
        ]
        if not pairs:
            grads = [tf.zeros_like(v) for v in sources]
        else:
            grads = tape.gradient(
                [o for o, _ in pairs], sources, output_gradients=[c for _, c in pairs],
                unconnected_gradients=tf.UnconnectedGradients.ZERO,
            )
        return [g if v is s else _with_component(v, tf.convert_to_tensor(g))
                for v, s, g in zip(values, sources, grads)]

    return outputs, backward


def float64_scope():
    return contextlib.nullcontext()
