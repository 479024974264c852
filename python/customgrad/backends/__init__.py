"""One small module per Keras backend. Each exposes the same names:

`tensor_value(leaf)` (the leaf as a backend tensor, or None if it is not a tensor), `is_tensor`,
`is_float`, `spec(tensor)` and `zeros(spec)` (an output's shape and dtype, without its memory),
`convert(grad, like)`, `static_shape`, `cast_like(grad, like)`, `float64_scope()`, `vjp_flat`
(for customgrad.grad/vjp) and `call(invocation)`, which runs a `customgrad._core.Invocation`
inside the backend's autodiff.
"""
