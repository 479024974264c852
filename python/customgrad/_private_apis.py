"""The one list of the private framework APIs customgrad reaches into, and why.

Each backend module imports what it needs where it needs it (on the hot path a module attribute
is the cheapest lookup); this list names every such API in one place, and
`tests/python/test_private_apis.py` resolves each one, so that a framework release that moves
one fails with the API's name, the framework version and the reason we need it, rather than
with an AttributeError deep inside a call.

>>> [api.framework for api in PRIVATE_APIS][:2]
['keras', 'keras']
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import NamedTuple


class PrivateAPI(NamedTuple):
    framework: str  # the framework's top-level module (tensorflow-cpu installs `tensorflow` too)
    module: str  # the module to import
    attribute: str  # a dotted attribute path inside it ("" for the module itself)
    why: str


PRIVATE_APIS = [
    PrivateAPI("keras", "keras.src.backend", "any_symbolic_tensors",
               "tells keras.Input-like arguments, to record one functional-graph node"),
    PrivateAPI("keras", "keras.src.backend.common.variables", "Variable._maybe_autocast",
               "every read of a keras.Variable goes through it: the variable recorder wraps it"),
    PrivateAPI("keras", "keras.src.layers.layer", "Layer.add_loss",
               "wrapped to count losses added inside a custom-gradient forward"),
    PrivateAPI("keras", "keras.src.backend.common.stateless_scope", "get_stateless_scope",
               "jax: the variable values of model.fit's stateless scope; remat: the scope its "
               "recomputation binds the variables f read in; tensorflow, torch: the values "
               "stateless_call binds, bound again for grad_fn"),
    PrivateAPI("keras", "keras.src.backend.common.stateless_scope", "in_stateless_scope",
               "jax, remat, tensorflow, torch: whether a stateless scope is active"),
    PrivateAPI("keras", "keras.src.backend.common.dtypes", "BIT64_TO_BIT32_DTYPE",
               "the gradient checker's float64 promotion"),
    PrivateAPI("keras", "keras.src.ops.core", "custom_gradient",
               "patch_keras replaces keras.ops.custom_gradient where it is defined"),
    PrivateAPI("keras", "keras.src.ops", "custom_gradient",
               "patch_keras: Keras's quantizers and quantized Dense/EinsumDense call it from here"),
    PrivateAPI("keras", "keras._tf_keras.keras.ops", "custom_gradient",
               "patch_keras: the tf.keras-compatible API module binds it too"),
    PrivateAPI("keras", "keras.src.backend", "core.custom_gradient",
               "patch_keras: the original keras.ops.custom_gradient calls the backend's"),
    PrivateAPI("keras", "keras.src.backend", "core.remat",
               "patch_keras routes keras.remat and keras.RematScope through customgrad.remat"),
    PrivateAPI("jax", "jax._src.interpreters.ad", "JVPTracer",
               "no public name tells an autodiff tracer (refusing closed-over tensors)"),
    PrivateAPI("jax", "jax._src.interpreters.ad", "LinearizeTracer", "the same, for linearize"),
    PrivateAPI("jax", "jax._src.traceback_util", "register_exclusion",
               "jax's traceback filtering removes customgrad's frames too (_tracebacks.py)"),
    PrivateAPI("jax", "jax._src.traceback_util", "include_frame",
               "which frames jax's traceback filtering keeps, applied where a customgrad "
               "transform calls jax's directly (_tracebacks.py)"),
    PrivateAPI("jax", "jax._src.interpreters.partial_eval", "trace_to_jaxpr_dynamic",
               "traces grad_fn into a jaxpr inside the forward rule, in a third of "
               "jax.make_jaxpr's time (which builds and traces a jit for it): once per "
               "custom-gradient call site while a transformation traces"),
    PrivateAPI("jax", "jax._src.linear_util", "wrap_init",
               "the function trace_to_jaxpr_dynamic traces (with its debug info)"),
    PrivateAPI("jax", "jax._src.api_util", "debug_info",
               "the debug info trace_to_jaxpr_dynamic's function needs, from a fixed signature"),
    PrivateAPI("jax", "jax._src.core", "trace_ctx",
               "the trace now: the constants of the jaxpr being traced tell the tracers of "
               "enclosing transformations that f used without receiving them "
               "(traced.traced_constants)"),
    PrivateAPI("tensorflow", "tensorflow.python.framework.op_callbacks", "add_op_callback",
               "TensorFlow's record of the ops f runs or builds: what f's outputs were computed "
               "from, whatever route led f to it (hidden_inputs.OpRecord)"),
    PrivateAPI("tensorflow", "tensorflow.python.framework.op_callbacks", "remove_op_callback",
               "the same, removed once f ran"),
    PrivateAPI("tensorflow", "tensorflow.python.framework.ops", "uid",
               "the counter every tensor's `_id` comes from: a tensor numbered after f began "
               "was made while f ran (a variable's read value, which no op callback sees)"),
    PrivateAPI("tensorflow", "tensorflow.python.eager.record", "stop_recording",
               "no public API stops recording on every tape at once"),
    PrivateAPI("tensorflow", "tensorflow.python.eager.record", "record_operation",
               "eager calls are recorded on the tapes as one operation whose backward is grad_fn"),
    PrivateAPI("tensorflow", "tensorflow.python.eager.record", "could_possibly_record",
               "skips recording when no tape is active"),
    PrivateAPI("tensorflow", "tensorflow.python.eager.record", "VariableWatcher",
               "finds the tf.Variables f reads, as tf.custom_gradient does"),
    PrivateAPI("tensorflow", "tensorflow.python", "pywrap_tfe.TFE_Py_PackJVPs",
               "tells whether a forward accumulator watches a tensor"),
    PrivateAPI("tensorflow", "tensorflow.python", "pywrap_tfe.TFE_Py_TapeSetPossibleGradientTypes",
               "tells whether a tape or a forward accumulator watches a tensor"),
    PrivateAPI("tensorflow", "tensorflow.python.ops.custom_gradient", "custom_gradient",
               "TensorFlow's own tf.custom_gradient, which graphs are built on, also while "
               "customgrad.patch_tensorflow() replaces the public name"),
    PrivateAPI("tensorflow", "tensorflow.python.ops.gradients_util", "PossibleTapeGradientTypes",
               "tells whether tapes are nested (whether f's intermediates must stay recorded)"),
    PrivateAPI("tensorflow", "tensorflow.python.ops.gradients_util",
               "POSSIBLE_GRADIENT_TYPES_FIRST_ORDER", "the same"),
    PrivateAPI("tensorflow", "tensorflow.python.ops.gradients_util",
               "POSSIBLE_GRADIENT_TYPES_NONE", "the same"),
    PrivateAPI("tensorflow", "tensorflow.python.framework.composite_tensor", "CompositeTensor",
               "tells ragged and sparse tensors"),
    PrivateAPI("tensorflow", "tensorflow.python.framework.ops", "_EagerTensorBase._copy_nograd",
               "an eager tensor of the same buffer that no tape records: f runs on it, unseen by "
               "the tapes that watch the call, seen by a tape f opens"),
    PrivateAPI("tensorflow", "tensorflow.python.autograph.core.config", "CONVERSION_RULES",
               "AutoGraph's module rules: customgrad adds DoNotConvert('customgrad'), so that a "
               "tf.function converts none of its code (_autograph.py)"),
    PrivateAPI("tensorflow", "tensorflow.python.autograph.core.config", "DoNotConvert",
               "the same"),
    PrivateAPI("tensorflow", "tensorflow.python.autograph.impl.api", "is_autograph_artifact",
               "reads the `autograph_info__` attribute customgrad sets on the functions it "
               "returns, so that AutoGraph calls them, and f, unconverted (_autograph.py)"),
    PrivateAPI("torch", "torch", "_C._FunctionBase.apply",
               "the fast path applies its autograd.Function through the C base's apply "
               "(`super(torch.autograd.Function, LinkFunction).apply`), skipping Function.apply's "
               "argument binding for setup_context and functorch unwrapping, neither of which "
               "it uses"),
    PrivateAPI("rpytools", "rpytools.call", "make_python_function",
               "reticulate makes an R function a Python closure whose first cell holds the R "
               "function; the R package's bridge (inst/python/customgrad_bridge.py, "
               "r_function_of) reads it back to call an R grad function in one crossing"),
    PrivateAPI("torch", "torch", "_C._are_functorch_transforms_active",
               "torch.func transforms need the autograd.Function form with setup_context"),
    PrivateAPI("torch", "torch", "_C._autograd._get_current_graph_task_keep_graph",
               "frees grad_fn's closure after its backward unless retain_graph=True"),
    PrivateAPI("torch", "torch", "_C._autograd._get_sequence_nr",
               "numbers the autograd nodes f makes (the hidden-parameter walk)"),
    PrivateAPI("torch", "torch", "_C._functions.AccumulateGrad",
               "tells the leaves the hidden-parameter walk reaches"),
    PrivateAPI("torch", "torch", "_C._functorch.unwrap_if_dead",
               "what autograd.Function.apply does to its arguments, on the fast path"),
    PrivateAPI("torch", "torch", "_C._functorch.TransformType",
               "tells nested forward-mode transforms (refused: torch would give a zero)"),
    PrivateAPI("torch", "torch._functorch.pyfunctorch", "retrieve_all_functorch_interpreters",
               "the same"),
    PrivateAPI("torch", "torch", "_C._functorch.maybe_get_level",
               "forward mode: peels a tensor's torch.func wrappers down to a jvp level, to tell "
               "whether it carries a tangent there (a tensor f reaches through an object)"),
    PrivateAPI("torch", "torch", "_C._functorch.is_batchedtensor", "the same"),
    PrivateAPI("torch", "torch", "_C._functorch.is_gradtrackingtensor", "the same"),
    PrivateAPI("torch", "torch", "_C._functorch._unwrap_batched", "the same"),
    PrivateAPI("torch", "torch", "_C._functorch._unwrap_for_grad",
               "the same; and unwraps the JVP derived inside the transforms f ran under back to "
               "the jvp rule's level (torch.func.hessian)"),
    PrivateAPI("torch", "torch", "_C._functorch.pop_dynamic_layer_stack",
               "sets aside (and keeps) torch.func's transforms: unpack_dual has no vmap rule, "
               "and the jvp rule runs outside the transforms nested in the jvp (hessian)"),
    PrivateAPI("torch", "torch", "_C._functorch.push_dynamic_layer_stack", "the same"),
    PrivateAPI("torch", "torch.autograd.forward_ad", "_current_level",
               "whether a dual level is open (one attribute read on the fast path)"),
]


def installed(framework: str) -> bool:
    """Whether `framework` (a top-level module name) can be imported, whichever distribution
    installed it."""
    return importlib.util.find_spec(framework) is not None


def version(framework: str) -> str:
    """The version of an installed framework, read from the module (the distribution may be
    named otherwise: tensorflow-cpu, jax-cuda plugins, a torch local build)."""
    return getattr(importlib.import_module(framework), "__version__", "(version unknown)")


def resolve(api: PrivateAPI):
    """The object `api` names; raises ImportError or AttributeError naming it otherwise."""
    obj = importlib.import_module(api.module)
    for name in filter(None, api.attribute.split(".")):
        obj = getattr(obj, name)
    return obj
