"""tf.RaggedTensor and tf.SparseTensor, as arguments and outputs of a custom-gradient function.

A ragged or sparse tensor is one value for f and grad_fn and one tensor for the tape: the tensor
that carries its gradient (its flat values; its values), as in tf.custom_gradient. Its structure
(row partitions; indices and dense shape) is a constant that its gradient shares: its spec
(`RaggedSpec`, `SparseSpec`) checks what grad_fn returns for it. Other composite tensors
(tf.IndexedSlices, extension types) are refused by name.

>>> import tensorflow as tf
>>> ragged = tf.ragged.constant([[1.0, 2.0], [3.0]])
>>> component(ragged).shape.as_list()
[3]
>>> with_component(RaggedSpec(ragged), tf.zeros(3)).row_splits.numpy().tolist()
[0, 2, 3]
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.framework.composite_tensor import CompositeTensor

from ... import _messages as msg, _tree
from ..._messages import GradFnResultError
from ..._spec import TensorSpec
from .tensors import cast_like, dense_spec, dims, is_float

def component(x: Any) -> Any:
    """The tensor that carries the gradient of `x`: a ragged tensor's flat values, a sparse
    tensor's values, `x` itself for anything else."""
    if isinstance(x, tf.Tensor):
        return x
    if isinstance(x, tf.RaggedTensor):
        return x.flat_values
    if isinstance(x, tf.SparseTensor):
        return x.values
    return x


def with_component(like: Any, component: Any) -> Any:
    """`like` (a value or a spec) rebuilt around `component`; `component` when `like` is dense."""
    if isinstance(like, CompositeSpec):
        return like.rebuild(component)
    if isinstance(like, tf.RaggedTensor):
        return like.with_flat_values(component)
    if isinstance(like, tf.SparseTensor):
        return tf.SparseTensor(like.indices, component, like.dense_shape)
    return component


def has_composite(values: Any) -> bool:
    for v in values:
        if not isinstance(v, tf.Tensor) and isinstance(v, CompositeTensor):
            return True
    return False


SUPPORTED = "tf.Tensor, tf.Variable, keras.Variable, tf.RaggedTensor or tf.SparseTensor"


def _refuse_other_composites(f, leaves, structure, name, what):
    """A CustomGradientError for the first composite tensor among `leaves` that is neither
    ragged nor sparse: TensorFlow has no gradient rule customgrad could follow for it."""
    for path, leaf in zip(_tree.leaf_paths(structure, name), leaves):
        if isinstance(leaf, CompositeTensor) and not isinstance(
                leaf, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
            hint = (" (tf.convert_to_tensor makes it dense)"
                    if isinstance(leaf, tf.IndexedSlices) else "")
            raise msg.tf_composite_refused(what, f, leaf, path, SUPPORTED, hint)


def refuse_other_composite_args(arguments: Any) -> None:
    args, kwargs = arguments.structure
    _refuse_other_composites(arguments.f, _tree.flatten(args), args, "args", "an argument of")
    _refuse_other_composites(arguments.f, _tree.flatten(kwargs), kwargs, "kwargs",
                             "a keyword argument of")


def refuse_other_composite_outputs(f: Any, output: Any, out_leaves: Any) -> None:
    for o in out_leaves:
        if not isinstance(o, tf.Tensor) and isinstance(o, CompositeTensor):
            _refuse_other_composites(f, out_leaves, output, "output", "an output of")
            return


def upstream_leaves(link: Any, cotangents: Any) -> Any:
    """The tape's cotangents (one per output `link` linked) as grad_fn's upstream leaves:
    ragged and sparse outputs get ragged and sparse upstreams; a tf.IndexedSlices (an output
    read through tf.gather) is made dense, as upstreams are on every backend."""
    specs = link.backward.output_specs
    if link.outputs is not None:
        specs = [specs[j] for j in link.outputs]
    leaves = []
    for s, ct in zip(specs, cotangents):
        composite = isinstance(s, CompositeSpec)
        if isinstance(ct, tf.IndexedSlices):
            ct = _dense(ct, s.values if composite else s)
        if composite and ct is not None:
            ct = s.rebuild(ct)
        leaves.append(ct)
    return leaves


def _dense(slices, spec):
    rows = spec.shape[0] if spec.runtime_shape is None else spec.runtime_shape[0]
    return tf.math.unsorted_segment_sum(slices.values, slices.indices, rows)


class CompositeSpec(TensorSpec):
    """The spec of a ragged or sparse tensor: its own shape and dtype, the spec of the tensor that
    carries its gradient (`values`), and the integer tensors that give its structure, which its
    gradient must share (`structure`)."""

    __slots__ = ("values", "structure")

    composite_type: type  # tf.RaggedTensor or tf.SparseTensor
    values: TensorSpec
    structure: tuple[Any, ...]

    def __init__(self, x: Any, values: Any) -> None:
        super().__init__(dims(x.shape), x.dtype, None, is_float(values))
        self.values = dense_spec(values)

    def check_gradient(self, grad: Any, who: str, where: str) -> Any:
        """What `who` (grad_fn) returned for this input (`where`), rebuilt on the input's
        structure; a GradFnResultError when it does not fit. In a graph, what is known only
        when it runs (sizes, row splits, indices) is compared then: an InvalidArgumentError with
        the same message."""

        def misfit(detail=""):
            return msg.composite_misfit(who, grad, detail, where, self, self.expected())

        if isinstance(grad, self.composite_type):
            structure = self.structure_of(grad)
            if structure is None:
                raise GradFnResultError(misfit(" with another structure"))
            values = component(grad)
        elif isinstance(grad, tf.Tensor):
            structure, values = (), grad
        else:
            raise GradFnResultError(misfit())
        if not _compatible(values.shape, self.values.shape):
            what = "values" if structure else "a dense tensor"
            raise GradFnResultError(misfit(f" ({what} of shape {dims(values.shape)})"))
        must_equal = []
        if self.values.runtime_shape is not None:
            must_equal.append((self.values.runtime_shape, tf.shape(values)))
        for mine, theirs in zip(self.structure, structure):
            if mine is not theirs:  # the same tensor: the common case, grad_fn kept dy's
                if not _compatible(theirs.shape, mine.shape):
                    raise GradFnResultError(misfit(" with another structure"))
                must_equal.append((mine, theirs))
        if must_equal:
            values = _when_equal(must_equal, values, misfit(" with another structure or size"))
        return self.rebuild(cast_like(values, self.values))


class RaggedSpec(CompositeSpec):
    __slots__ = ("partitions",)
    describe_as = "tf.RaggedTensor"
    composite_type: type = tf.RaggedTensor
    partitions: Any

    def __init__(self, x: Any) -> None:
        super().__init__(x, x.flat_values)
        # the partitions themselves (private): rebuilding from row splits alone would lose
        # uniform row lengths, which the static shape shows
        self.partitions = x._nested_row_partitions
        self.structure = tuple(p.row_splits() for p in self.partitions)

    def rebuild(self, values: Any) -> Any:
        return tf.RaggedTensor._from_nested_row_partitions(values, self.partitions, validate=False)

    def structure_of(self, grad: Any) -> Any:
        if grad.ragged_rank != len(self.partitions):
            return None
        return grad.nested_row_splits

    def expected(self) -> str:
        return (f"a tf.RaggedTensor with the row splits of the input (ragged_rank "
                f"{len(self.partitions)}, flat values of shape {tuple(self.values.shape)}) or a "
                f"dense tensor of its flat values")


class SparseSpec(CompositeSpec):
    __slots__ = ()
    describe_as = "tf.SparseTensor"
    composite_type: type = tf.SparseTensor

    def __init__(self, x: Any) -> None:
        super().__init__(x, x.values)
        self.structure = (x.indices, x.dense_shape)

    def rebuild(self, values: Any) -> Any:
        indices, dense_shape = self.structure
        return tf.SparseTensor(indices, values, dense_shape)

    def structure_of(self, grad: Any) -> Any:
        return (grad.indices, grad.dense_shape)

    def expected(self) -> str:
        return (f"a tf.SparseTensor with the indices and dense shape of the input "
                f"{tuple(self.shape)} (values of shape {tuple(self.values.shape)}) or a dense "
                f"tensor shaped as its values")


def _compatible(shape, sizes) -> bool:
    """Whether a TensorShape and a tuple of sizes (None: unknown) can describe the same
    tensor."""
    if shape.rank is None:
        return True
    got = shape.as_list()
    return len(got) == len(sizes) and all(
        a is None or b is None or a == b for a, b in zip(got, sizes))


def _when_equal(pairs, values, message):
    """`values`, once each pair of integer tensors is equal: compared now in eager mode, when the
    graph runs otherwise."""
    if tf.executing_eagerly():
        for mine, theirs in pairs:
            if mine.shape != theirs.shape or not bool(tf.reduce_all(tf.equal(mine, theirs))):
                raise GradFnResultError(message)
        return values
    # apostrophes would reach the InvalidArgumentError escaped
    message = message.replace("'", "")
    same_shapes = [tf.debugging.assert_equal(tf.shape(mine), tf.shape(theirs), message=message)
                   for mine, theirs in pairs]
    with tf.control_dependencies(same_shapes):
        same = [tf.debugging.assert_equal(mine, theirs, message=message) for mine, theirs in pairs]
    with tf.control_dependencies(same):
        return tf.identity(values)
