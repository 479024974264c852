# What customgrad re-exports from the packages it builds on (no copies of their code).

# `%||%` is in base R only from 4.4, and keras3 does not export one; the upstream idiom of
# op_custom_gradient()'s grad functions, `upstream <- upstream %||% ..1` (keras3's own example),
# needs it on every R that customgrad supports (R >= 4.1). rlang's, re-exported as purrr does.
#' @importFrom rlang %||%
#' @export
rlang::`%||%`
