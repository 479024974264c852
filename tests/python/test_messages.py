"""Every message `customgrad._messages` builds, pinned whole: one test per builder (the tests
elsewhere check that each message is raised where it belongs; these check its exact words)."""

import inspect
import re

import numpy as np

from customgrad import _messages as msg, _tree
from customgrad._messages import CustomGradientError, GradFnArityError, GradFnResultError
from customgrad._spec import TensorSpec


def f(x):
    return x


def grad(dy):
    return dy


def grad_variables(dy, *, variables):
    return dy


class Report:
    """A failed gradient check, as check_failed reads it."""

    def __init__(self):
        first = type("Failure", (), {})()
        first.name, first.where = "VJP vs finite differences", "args[0]"
        first.error, first.allowed = 0.5, 0.001
        self.failures, self.checks, self.function = [first], [first, first], "f"

    def __str__(self):
        return "(the report)"


def _pin(error, kind, text):
    """`error` is a `kind` (a str: the text itself) whose message is exactly `text`."""
    if kind is str:
        assert isinstance(error, str)
        message = error
    else:
        assert type(error) is kind, type(error)
        message = str(error)
    assert re.fullmatch(re.escape(text), message), message


def test_every_builder_is_pinned():
    builders = {name for name, fn in inspect.getmembers(msg, inspect.isfunction)
                if fn.__module__ == msg.__name__ and not name.startswith("_")}
    builders -= {"fn_name", "signature_text"}  # helpers, tested below
    tests = {name[len("test_"):] for name in globals() if name.startswith("test_")}
    assert builders <= tests, builders - tests


def test_fn_name():
    class Model:
        def call(self):
            pass

    assert msg.fn_name(Model.call) == "test_fn_name.<locals>.Model.call"
    assert msg.fn_name(Model.call, qualified=False) == "call"
    assert msg.fn_name(lambda: 0, qualified=False) == "<lambda>"


def test_signature_text():
    assert msg.signature_text(grad_variables) == "(dy, *, variables)"
    assert msg.signature_text(min) == "(unknown)"


def test_custom_gradient_error_is_a_value_error():
    assert issubclass(CustomGradientError, ValueError)
    assert CustomGradientError.__module__ == "customgrad"


def test_unsupported_backend():
    error = msg.unsupported_backend('mlx', ('jax', 'tensorflow', 'torch', 'numpy'))
    _pin(error, NotImplementedError, (
        "customgrad: the Keras backend 'mlx' is not supported; expected one of ['jax', "
        "'tensorflow', 'torch', 'numpy']."
    ))


def test_not_callable():
    error = msg.not_callable(3)
    _pin(error, TypeError, (
        'customgrad.custom_gradient: expected a callable f(*args) returning (output, grad_fn); '
        'received an int.'
    ))


def test_bool_option_forward_mode():
    error = msg.bool_option('customgrad.custom_gradient', 'forward_mode', 'yes')
    _pin(error, TypeError, (
        "customgrad.custom_gradient: forward_mode must be True or False; received 'yes' (str)."
    ))


def test_hidden_input():
    error = msg.hidden_input(f, keyword='scale')
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` uses the tensor passed by keyword `scale`, which is '
        'being differentiated; a custom gradient defines gradients for the positional arguments '
        'only (grad_fn returns one per positional argument), so this one would be lost. Pass it '
        'as a positional argument and return its gradient from grad_fn.'
    ))


def test_hidden_input_closed_over():
    error = msg.hidden_input(f, closed_over='w')
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` uses the tensor `w` it closes over, which is being '
        'differentiated; a custom gradient defines gradients for the positional arguments only '
        '(grad_fn returns one per positional argument), so this one would be lost. Pass it as a '
        'positional argument and return its gradient from grad_fn.'
    ))


def test_hidden_input_through_an_object():
    error = msg.hidden_input(f, through='self.w')
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` uses the tensor `self.w`, read through an object, which '
        'is being differentiated; a custom gradient defines gradients for the positional '
        'arguments only (grad_fn returns one per positional argument), so this one would be '
        'lost. Pass it as a positional argument and return its gradient from grad_fn.'
    ))


def test_grad_fn_of():
    _pin(msg.grad_fn_of(f, grad), str, 'grad_fn `grad` of `f`')


def test_foreign_value():
    error = msg.foreign_value('tensorflow', 'jax', '`f`', np.zeros((2,), 'float32'), 'output')
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` returned a numpy array of shape (2,) and dtype float32 '
        'as output, but the Keras backend is jax; a custom-gradient function and its grad_fn '
        "must compute with keras.ops (or jax's own ops). Replace the tensorflow ops (e.g. "
        'tf.exp -> keras.ops.exp), or set KERAS_BACKEND=tensorflow.'
    ))


def test_raised_while_running():
    error = msg.raised_while_running('tensorflow', 'torch', f)
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: tensorflow raised the error above while `f` ran, but the '
        'Keras backend is torch; a custom-gradient function and its grad_fn must compute with '
        "keras.ops (or torch's own ops). Replace the tensorflow ops (e.g. tf.exp -> "
        'keras.ops.exp), or set KERAS_BACKEND=tensorflow.'
    ))


def test_not_a_pair():
    error = msg.not_a_pair(f, (1.0, 2.0, 3.0))
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` must return a pair (output, grad_fn); received a tuple '
        'of length 3.'
    ))


def test_grad_fn_not_callable():
    error = msg.grad_fn_not_callable(f, None)
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: the second element returned by `f` must be a callable '
        'grad_fn; received None.'
    ))


def test_loss_in_forward():
    error = msg.loss_in_forward(f, 'the backend cannot differentiate it')
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` added a loss (layer.add_loss) inside its forward; the '
        'backend cannot differentiate it. Add the loss outside the custom-gradient function.'
    ))


def test_grad_fn_arity():
    error = msg.grad_fn_arity(grad, f, (1.0, 2.0), 2)
    _pin(error, GradFnArityError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` has the signature (dy), so it cannot '
        'be called with the upstream gradients of a tuple of length 2 (2 upstream gradients). '
        'grad_fn must take one positional parameter per output leaf (2), or one for the whole '
        "output's upstream structure, or *args, or only the keyword `upstream`."
    ))


def test_grad_fn_arity_required_keywords():
    error = msg.grad_fn_arity(grad, f, 1.0, 1, required_keywords=('scale',))
    _pin(error, GradFnArityError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` has the signature (dy), so it cannot '
        'be called with the upstream gradients of a float (1 upstream gradient). grad_fn must '
        "take one positional parameter per output leaf (1), or one for the whole output's upstream "
        'structure, or *args, or only the keyword `upstream`. It also requires the keyword '
        "argument(s) ['scale'], which customgrad does not pass."
    ))


def test_grad_fn_arity_needs_variables():
    error = msg.grad_fn_arity(grad_variables, f, 1.0, 1, needs_variables=True)
    _pin(error, GradFnArityError, (
        'customgrad.custom_gradient: grad_fn `grad_variables` of `f` has the signature (dy, *, '
        'variables), so it cannot be called with the upstream gradients of a float (1 upstream '
        'gradient). grad_fn must take one positional parameter per output leaf (1), or one for the '
        "whole output's upstream structure, or *args, or only the keyword `upstream`. It "
        'requires `variables`, but `f` read no trainable variable: give that parameter a '
        'default (variables=None).'
    ))


def test_variables_not_accepted():
    error = msg.variables_not_accepted(f, grad, ['dense/kernel'])
    _pin(error, CustomGradientError, (
        "customgrad.custom_gradient: `f` read the trainable variables ['dense/kernel'], so its "
        'grad_fn `grad` must accept a `variables` keyword argument and return (grad_xs, '
        'grad_vars); received a grad_fn with signature (dy). Without it these variables would '
        'get no gradient.'
    ))


def test_variables_result_not_a_pair():
    error = msg.variables_result_not_a_pair(f, grad, 1.0)
    _pin(error, GradFnResultError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` was given variables= and must return '
        'a pair (grad_xs, grad_vars); received a float.'
    ))


def test_grad_vars_count():
    error = msg.grad_vars_count(f, grad, 2, [1.0])
    _pin(error, GradFnResultError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` must return one gradient per '
        'variable (2) in grad_vars; received a list of length 1.'
    ))


def test_grad_xs_structure():
    error = msg.grad_xs_structure(
        f, grad, (TensorSpec((2,), 'float32', None, True), 3), 1, [1.0, 2.0, 3.0],
        _tree.StructureMismatch('', 'a tuple of length 2', 'a list of length 3'))
    _pin(error, GradFnResultError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` must return one gradient per '
        'positional argument (2: a tensor of shape (2,) and dtype float32, an int) or a flat '
        'sequence of 1 (one per tensor leaf); received a list of length 3 (at the top level: '
        'expected a tuple of length 2, received a list of length 3).'
    ))


def test_gradient_shape():
    error = msg.gradient_shape(f, grad, (3,), 'args[0]', (2,))
    _pin(error, GradFnResultError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` returned a gradient of shape (3,) '
        "for args[0], which has shape (2,); gradients must have their input's shape (customgrad "
        'never broadcasts or sums them for you).'
    ))


def test_foreign_value_of_grad_fn():
    error = msg.foreign_value('torch', 'jax', msg.grad_fn_of(f, grad), np.zeros((2,), 'float32'),
                              msg.variable_place('dense/kernel'))
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` returned a numpy array of shape (2,) '
        'and dtype float32 as the variable dense/kernel, but the Keras backend is jax; a '
        "custom-gradient function and its grad_fn must compute with keras.ops (or jax's own "
        'ops). Replace the torch ops (e.g. tf.exp -> keras.ops.exp), or set '
        'KERAS_BACKEND=torch.'
    ))


def test_variable_place():
    error = msg.variable_place('dense/kernel')
    _pin(error, str, (
        'the variable dense/kernel'
    ))


def test_composite_misfit():
    error = msg.composite_misfit(
        msg.grad_fn_of(f, grad), np.zeros((3,), 'float32'),
        ' (a dense tensor of shape (3,))', 'args[0]', TensorSpec((2, None), 'float32', None, True),
        'a dense tensor of its flat values')
    _pin(error, str, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` returned a numpy array of shape (3,) '
        'and dtype float32 (a dense tensor of shape (3,)) for args[0], a tensor of shape (2, '
        'None) and dtype float32; expected a dense tensor of its flat values.'
    ))


def test_grad_fn_not_linear():
    error = msg.grad_fn_not_linear(f, grad, 'clips the upstream')
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: the grad_fn `grad` of `f` is not linear in its upstream '
        'gradient (clips the upstream), so it defines no forward-mode derivative: a JVP is '
        'derived from grad_fn as the transpose of a linear map, and there is none here. Use '
        'reverse mode (customgrad.grad, customgrad.vjp) for this function.'
    ))


def test_torch_second_backward():
    error = msg.torch_second_backward()
    _pin(error, RuntimeError, (
        'customgrad.custom_gradient: trying to backward through the graph a second time; its '
        'grad_fn and the tensors it holds were freed after the first backward. Pass '
        'retain_graph=True to the first backward to keep them.'
    ))


def test_torch_forward_over_forward():
    error = msg.torch_forward_over_forward(f)
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` is differentiated forward over forward (nested '
        'torch.func.jvp or jacfwd); torch does not differentiate the JVP rule of an '
        'autograd.Function, so the second derivative would be silently zero. Take second '
        'derivatives forward over reverse (torch.func.hessian, jacfwd(jacrev(f))) or reverse '
        'over reverse.'
    ))


def test_torch_modified_in_place():
    error = msg.torch_modified_in_place(f, 'e', (2,), 1, 2)
    _pin(error, RuntimeError, (
        'customgrad.custom_gradient: `e`, a tensor the grad_fn of `f` uses (shape (2,)), was '
        'modified by an in-place operation after the forward (version 1, now 2), so the '
        'gradient would be wrong. Modify a clone, or compute the new value out of place.'
    ))


def test_torch_hidden_leaves():
    error = msg.torch_hidden_leaves(f, grad, "the parameter 'layer.weight' (shape (2, 2))")
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` used tensors that require grad without receiving them '
        "as arguments: the parameter 'layer.weight' (shape (2, 2)). Its grad_fn `grad` does not "
        'accept a `variables` keyword argument, so they would get no gradient. Pass them to `f` '
        'as positional arguments, or let grad_fn accept `variables=` (it then receives them, '
        'after any keras.Variables read, and returns (grad_xs, grad_vars)).'
    ))


def test_gradient_not_a_number():
    error = msg.gradient_not_a_number(f, grad, "oops", "args[0]")
    _pin(error, GradFnResultError, (
        'customgrad.custom_gradient: grad_fn `grad` of `f` returned a str as the gradient for '
        'args[0]; a gradient must be a tensor, a number or a numeric numpy value (or None for no '
        'gradient).'
    ))


def test_torch_hidden_computed():
    error = msg.torch_hidden_computed(f, ["ViewBackward0"])
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` used tensors that require grad, computed before it ran, '
        'without receiving them as arguments (its outputs depend on them through ViewBackward0); '
        'customgrad did not find them among the objects `f` closes over, so they would get no '
        'gradient. Pass them to `f` as positional arguments (a parameter that is a view, as '
        'FSDP1 makes a module\'s weights, is found when f reads it from a module it closes over).'
    ))


def test_jax_grad_fn_assigned():
    error = msg.jax_grad_fn_assigned(f, 1)
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: grad_fn of `f` assigned 1 variable(s); on jax inside a '
        'stateless scope (model.fit) an assignment cannot leave the backward pass. Assign in '
        'the forward instead.'
    ))


def test_jax_forward_mode_assigned():
    error = msg.jax_forward_mode_assigned(f, 2)
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` (forward_mode=True) assigned 2 variable(s) inside a '
        'stateless scope; on jax such updates cannot leave a custom_jvp function. Use '
        'forward_mode=False (the default) for functions that assign variables.'
    ))


def test_jax_hidden_tracer():
    error = msg.jax_hidden_tracer(f, ['h.t', "holder['t']"])
    _pin(error, msg.JaxHiddenTracerError, (
        "customgrad.custom_gradient: `f` reaches `h.t`, `holder['t']`, a tensor being "
        "differentiated, through an object it closes over (an attribute, or an element of a list "
        "or dict) instead of receiving it as an argument. On jax, where a transformation traces "
        "the call (jax.grad or jax.vjp of its arguments too, jacrev, vmap or jit of grad), it "
        "runs inside a jax.custom_vjp, which cannot use such a value of the enclosing "
        "transformation. Pass it to `f` as a positional argument and return its gradient from "
        "grad_fn."
    ))
    assert isinstance(error, CustomGradientError)


def test_jax_hidden_tracer_unnamed():
    _pin(msg.jax_hidden_tracer(f, []), msg.JaxHiddenTracerError, (
        "customgrad.custom_gradient: `f` reaches a tensor being differentiated through an "
        "object, a bound method, a partial, a generator or another route instead of receiving "
        "it as an argument. On jax, where a transformation traces the "
        "call (jax.grad or jax.vjp of its arguments too, jacrev, vmap or jit of grad), it runs "
        "inside a jax.custom_vjp, which cannot use such a value of the enclosing "
        "transformation. Pass it to `f` as a positional argument and return its gradient from "
        "grad_fn."))


def test_jax_forward_mode_needs_opt_in():
    error = msg.jax_forward_mode_needs_opt_in(f, TypeError('no jvp'))
    _pin(error, msg.JaxForwardModeError, (
        'customgrad.custom_gradient: forward mode (jax.jvp, jax.jacfwd) reached `f`, which is '
        'built for reverse mode only; on jax, forward mode needs '
        'customgrad.custom_gradient(..., forward_mode=True), which derives it from grad_fn '
        '(no jvp)'
    ))
    assert isinstance(error, CustomGradientError) and isinstance(error, TypeError)


def test_tf_composite_refused():
    error = msg.tf_composite_refused('an argument of', f, 3, 'args[0]',
                                     'tf.Tensor or tf.RaggedTensor',
                                     ' (tf.convert_to_tensor makes it dense)')
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: an argument of `f` is an int at args[0]; on tensorflow a '
        'custom gradient supports tf.Tensor or tf.RaggedTensor there (tf.convert_to_tensor '
        'makes it dense).'
    ))


def test_tf_composite_forward_mode():
    error = msg.tf_composite_forward_mode(f)
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` has ragged or sparse arguments and a '
        'tf.autodiff.ForwardAccumulator opened inside a tf.function watches it; forward mode of '
        'composite tensors is supported in eager mode only.'
    ))


def test_tf_reference_variable():
    error = msg.tf_reference_variable(f)
    _pin(error, CustomGradientError, (
        'customgrad.custom_gradient: `f` uses a reference (non-resource) variable, which a '
        'custom gradient cannot route to grad_fn; create it as a resource variable (TensorFlow '
        "2's default; use_resource=True in a variable_scope)."
    ))


def test_tf_keras_variables_in_grad_fn():
    error = AttributeError("'Variable' object has no attribute 'ref'")
    _pin(msg.tf_keras_variables_in_grad_fn(f, error, ["dense/kernel"]), CustomGradientError,
         "customgrad.custom_gradient: the grad_fn of `f` raised AttributeError ('Variable' "
         "object has no attribute 'ref') while variables= held the keras.Variables "
         "['dense/kernel']. customgrad passes the keras.Variables f read, where "
         "tf.custom_gradient passes tf.Variables; TensorFlow's own APIs (GradientTape.watch, "
         ".ref(), watched_variables()) take the tf.Variable a keras.Variable holds: `v.value` "
         "on tensorflow. For a grad_fn written for tf.custom_gradient, decorate f with "
         "customgrad.custom_gradient(f, tf_variables=True), which passes it the tf.Variables.")


def test_tf_vjp_composite():
    error = msg.tf_vjp_composite(Report(), 'tf.Tensor or tf.RaggedTensor')
    _pin(error, TypeError, (
        'customgrad.vjp: cannot differentiate with respect to a Report; on tensorflow the values '
        'may be tf.Tensor or tf.RaggedTensor.'
    ))


def test_aux_not_a_pair():
    error = msg.aux_not_a_pair('customgrad', lambda x: x, 1.0)
    _pin(error, TypeError, (
        'customgrad: with has_aux=True, `<lambda>` must return a pair (output, aux); received a '
        'float.'
    ))


def test_no_autodiff():
    error = msg.no_autodiff('customgrad.vjp', 'numpy', 'gradients')
    _pin(error, NotImplementedError, (
        "customgrad.vjp: the 'numpy' Keras backend has no autodiff; gradients need jax, "
        'tensorflow or torch.'
    ))


def test_cotangent_structure():
    error = msg.cotangent_structure(_tree.StructureMismatch('', 'a tuple of length 2', 'a float'))
    _pin(error, ValueError, (
        'customgrad.vjp: the cotangents must have the structure of the outputs; at the top '
        'level: expected a tuple of length 2, received a float'
    ))


def test_bad_argnums():
    error = msg.bad_argnums(())
    _pin(error, TypeError, (
        'customgrad.value_and_grad: argnums must be an int or a non-empty tuple of ints; '
        'received ().'
    ))


def test_argnums_out_of_range():
    error = msg.argnums_out_of_range(2, 2, f, 1)
    _pin(error, ValueError, (
        'customgrad.grad: argnums 2 refers to positional argument 2, but `f` was called with 1.'
    ))


def test_not_a_scalar():
    error = msg.not_a_scalar(f, np.zeros((2,), 'float32'))
    _pin(error, TypeError, (
        'customgrad.grad: `f` must return a float scalar (shape ()) to take its gradient; '
        'received a numpy array of shape (2,) and dtype float32. Use customgrad.vjp for '
        'non-scalar outputs.'
    ))


def test_nothing_to_differentiate():
    error = msg.nothing_to_differentiate(0, f, 3)
    _pin(error, TypeError, (
        'customgrad.grad: argument 0 of `f` must contain a floating-point value to '
        'differentiate with respect to; received an int. Pass floats (3.0, np.float32(3.0), a '
        'float tensor).'
    ))


def test_primals_not_a_tuple():
    error = msg.primals_not_a_tuple('customgrad.hvp', f, 1.0, non_empty=True)
    _pin(error, TypeError, (
        'customgrad.hvp: primals must be a non-empty tuple of the positional arguments of `f`; '
        'received a float.'
    ))


def test_tangent_structure():
    error = msg.tangent_structure((1.0,), [1.0, 2.0], _tree.StructureMismatch(
        '', 'a tuple of length 1', 'a tuple of length 2'))
    _pin(error, ValueError, (
        'customgrad.jvp: tangents must have the structure of primals (a tuple of length 1); '
        'received a list of length 2 (at the top level: expected a tuple of length 1, received '
        'a tuple of length 2).'
    ))


def test_tangent_shape():
    error = msg.tangent_shape('primals[0]', (3,), (2,))
    _pin(error, ValueError, (
        'customgrad.jvp: the tangent of primals[0] has shape (3,), but the primal has shape '
        "(2,); each tangent must have its primal's shape."
    ))


def test_jvp_of_reverse_only():
    error = msg.jvp_of_reverse_only(f, TypeError('no jvp'))
    _pin(error, CustomGradientError, (
        'customgrad.jvp: `f` calls a custom-gradient function built for reverse mode only; on '
        'jax, forward mode needs customgrad.custom_gradient(..., forward_mode=True) (no jvp)'
    ))


def test_check_no_float_argument():
    error = msg.check_no_float_argument(f, (3,))
    _pin(error, ValueError, (
        'customgrad.check_gradients: `f` has no floating-point tensor among its positional '
        "arguments; received ['an int']."
    ))


def test_check_composite_argument():
    error = msg.check_composite_argument('args[0]', f, TensorSpec((2, None), 'float32', None, True))
    _pin(error, ValueError, (
        'customgrad.check_gradients: args[0] of `f` is a tensor of shape (2, None) and dtype '
        'float32; finite differences need dense tensors. Check a function of its (flat) values '
        'instead, one that rebuilds it inside.'
    ))


def test_check_option():
    error = msg.check_option('order', '1 or 2', 3)
    _pin(error, ValueError, (
        'customgrad.check_gradients: order must be 1 or 2; received 3.'
    ))


def test_check_jacobian_too_large():
    error = msg.check_jacobian_too_large(100, 100)
    _pin(error, ValueError, (
        'customgrad.check_gradients: jacobian=True is for small inputs (inputs x outputs <= '
        '4096); received 100 input and 100 output elements.'
    ))


def test_check_not_custom():
    error = msg.check_not_custom(f)
    _pin(error, ValueError, (
        "customgrad.check_gradients: against='autodiff' needs a function decorated with "
        'customgrad.custom_gradient; received `f`, which is not.'
    ))


def test_check_failed():
    error = msg.check_failed(Report())
    _pin(error, str, (
        'customgrad.check_gradients: the gradient of `f` is wrong: VJP vs finite differences '
        'failed at args[0]: error 0.5 > allowed 0.001 (1 of 2 checks failed).\n(the report)'
    ))


def test_clip_bounds():
    error = msg.clip_bounds(1.0, -1.0)
    _pin(error, ValueError, (
        'customgrad.ops.clip_gradient: min_value must be <= max_value; received min_value=1.0, '
        'max_value=-1.0.'
    ))


def test_clip_norm():
    error = msg.clip_norm(0.0)
    _pin(error, ValueError, (
        'customgrad.ops.clip_gradient_norm: max_norm must be > 0; received 0.0.'
    ))


def test_layer_not_a_number():
    error = msg.layer_not_a_number('GradientScale', 'scale', '2')
    _pin(error, TypeError, (
        "customgrad.layers.GradientScale: scale must be a number; received '2'."
    ))


def test_layer_not_positive():
    error = msg.layer_not_positive('ClipGradient', 'max_norm', -1.0)
    _pin(error, ValueError, (
        'customgrad.layers.ClipGradient: max_norm must be > 0; received -1.0.'
    ))


def test_clip_layer_without_bounds():
    error = msg.clip_layer_without_bounds()
    _pin(error, ValueError, (
        'customgrad.layers.ClipGradient: give min_value and max_value, max_norm, or both; '
        'received none of them.'
    ))


def test_clip_layer_half_bounds():
    error = msg.clip_layer_half_bounds(-1.0, None)
    _pin(error, ValueError, (
        'customgrad.layers.ClipGradient: min_value and max_value go together; received '
        'min_value=-1.0, max_value=None.'
    ))


def test_quantizer_levels():
    error = msg.quantizer_levels(1)
    _pin(error, ValueError, (
        'customgrad.layers.StraightThroughQuantizer: levels must be an int >= 2; received 1.'
    ))


def test_quantizer_range():
    error = msg.quantizer_range(1.0, 0.0)
    _pin(error, ValueError, (
        'customgrad.layers.StraightThroughQuantizer: max_value must be > min_value; received '
        'min_value=1.0, max_value=0.0.'
    ))


def test_remat_not_callable():
    _pin(msg.remat_not_callable(3), TypeError, (
        "customgrad.remat: expected a callable f(*args, **kwargs) whose forward is recomputed in "
        "the backward; received an int."))


def test_remat_framework_variables():
    _pin(msg.remat_framework_variables(f, ["w:0"]), CustomGradientError, (
        "customgrad.remat: `f` read the trainable variables ['w:0'], which are not "
        "keras.Variables; the recomputation can give gradients to f's positional arguments and "
        "to the keras.Variables it reads only. Pass them to f as arguments, or make them "
        "keras.Variables."))


def test_bool_option():
    _pin(msg.bool_option("customgrad.custom_gradient", "tf_variables", 1), TypeError, (
        "customgrad.custom_gradient: tf_variables must be True or False; received 1 (int)."))


def test_tf_variables_off_tensorflow():
    _pin(msg.tf_variables_off_tensorflow(f, "jax"), ValueError, (
        "customgrad.custom_gradient: tf_variables=True (for `f`) expects the tensorflow backend, "
        "whose grad_fn can receive the tf.Variables f read, as tf.custom_gradient passes them; "
        "received the jax backend, which has no tf.Variables. Leave tf_variables out: "
        "variables= then holds the keras.Variables f read, on every backend."))


def test_patch_tensorflow_off_tensorflow():
    _pin(msg.patch_tensorflow_off_tensorflow("torch"), ValueError, (
        "customgrad.patch_tensorflow() expects the tensorflow Keras backend, on which "
        "customgrad.custom_gradient takes TensorFlow tensors as tf.custom_gradient does; "
        "received the torch backend. Set KERAS_BACKEND=tensorflow before Keras is imported, or "
        "use customgrad.patch_keras() to route keras.ops.custom_gradient."))


def test_the_arity_error_is_a_custom_gradient_error_of_its_own_class():
    """`except CustomGradientError` still catches it; R (and anyone) can tell it by its class,
    not by its text; both classes read as customgrad's own."""
    import customgrad

    assert issubclass(customgrad.GradFnArityError, customgrad.CustomGradientError)
    assert customgrad.GradFnArityError.__module__ == "customgrad"


def test_the_result_error_is_a_custom_gradient_error_of_its_own_class():
    """Likewise for gradients that do not fit the arguments: a CustomGradientError (and a
    ValueError) that reads as customgrad's own."""
    import customgrad

    assert issubclass(customgrad.GradFnResultError, customgrad.CustomGradientError)
    assert not issubclass(customgrad.GradFnResultError, customgrad.GradFnArityError)
    assert customgrad.GradFnResultError.__module__ == "customgrad"
    assert "GradFnResultError" in customgrad.__all__


def test_the_errors_about_grad_fn_carry_the_name_of_f():
    """The function's name, as the message gives it, without reading the message (the R
    package's headline names it so); None on the class, where no builder set it."""
    class Model:
        def call(self, x):
            return x

    built = [msg.grad_fn_arity(grad, Model.call, 1.0, 1),
             msg.variables_result_not_a_pair(Model.call, grad, 1.0),
             msg.grad_vars_count(Model.call, grad, 2, [1.0]),
             msg.grad_xs_structure(Model.call, grad, (1.0,), 1, [1.0, 2.0], "a mismatch"),
             msg.gradient_shape(Model.call, grad, (3,), "args[0]", (2,)),
             msg.gradient_not_a_number(Model.call, grad, "oops", "args[0]")]
    for error in built:
        assert error.function_name.endswith(".<locals>.Model.call"), error.function_name
        assert f"`{error.function_name}`" in str(error)
    assert GradFnResultError("why").function_name is None


def test_torch_hidden_tangent():
    _pin(msg.torch_hidden_tangent(f, grad, ["h.t", "self.w"]), msg.TorchHiddenTangentError, (
        "customgrad.custom_gradient: `f` reaches `h.t`, `self.w` through an object it closes "
        "over (an attribute, an element of a list or dict, a module's parameter) instead of "
        "receiving it as an argument, and it carries a forward-mode tangent (torch.func.jvp, "
        "jacfwd, torch.autograd.forward_ad). The JVP is derived from grad_fn, and its grad_fn "
        "`grad` does not accept a `variables` keyword argument, so that tangent would be lost. "
        "Pass it to `f` as a positional argument, or let grad_fn accept `variables=` (it then "
        "receives it, after any keras.Variables read, and returns (grad_xs, grad_vars))."))


def test_torch_hidden_tangent_unnamed():
    _pin(msg.torch_hidden_tangent(f, grad, []), msg.TorchHiddenTangentError, (
        "customgrad.custom_gradient: `f` reaches a tensor it did not receive as an argument "
        "(through an object, a bound method, a partial, a generator, ...) that carries a "
        "forward-mode tangent (torch.func.jvp, jacfwd, torch.autograd.forward_ad). The JVP is "
        "derived from grad_fn, and customgrad cannot tell which tensor it is, so its tangent "
        "would be lost. Pass it to `f` as a positional argument."))


def test_torch_jvp_over_transform():
    _pin(msg.torch_jvp_over_transform(f, ["Vmap"]), CustomGradientError, (
        "customgrad.custom_gradient: `f` is differentiated in forward mode (torch.func.jvp, "
        "jacfwd) over a Vmap transform nested inside it; torch runs the JVP rule outside that "
        "transform, and customgrad can derive it from grad_fn there only for grad transforms "
        "(torch.func.hessian, jacfwd(jacrev(f))). Apply the Vmap outside the forward-mode "
        "transform, or differentiate in reverse mode (jacrev)."))
