"""The R conventions of the generated op wrappers, as one table read by tools/generate_ops.py.

Only literal data: the generator reads this table and the Python signatures, nothing else. An
argument name that neither ARGS nor its op's entry in OPS names is a generator error (naming the
op and the argument), never a silent default.

TRANSFORMERS: how an R argument becomes a Python one. Each entry has
  "r":            the R expression ({arg}: the R argument, {fn}: the R function name,
                  {py}: the Python argument name); every one goes through the single converter
                  to_py() of R/convert.R (the one R -> Python conversion), after the index shift
                  or integer coercion;
  "doc":          text added to the argument's documentation;
  "shift":        added to a non-negative integer default (1-based in R: axis 0 -> 1);
  "zero_indexed": the op gets a `zero_indexed = FALSE` argument (keras3: TRUE takes and gives
                  0-based indices);
  "axis":         the argument is an axis, checked against the rank of the op's data argument
                  when the op fails (an R error naming the out-of-range axis);
  "data":         the argument can be the data an op's axes index (its first argument).
"""

TRANSFORMERS = {
    # keras3's (reticulate's) conversion of any value: R scalars -> Python scalars, vectors ->
    # tensors of floatx, arrays -> numpy arrays, functions -> Python callables, strings as they are
    "value": {"r": "to_py({arg})", "data": True},
    # always a tensor (doubles of floatx, scalars included): customgrad.ops takes tensors
    "tensor": {"r": "to_py({arg}, tensors = TRUE)", "data": True},
    # passed as it is (dtype names)
    "plain": {"r": "{arg}"},
    # keras3's as_array(): R vectors become arrays too (doubles float64)
    "array": {"r": "as_array_arg({arg})", "data": True},
    # 1-based axes -> 0-based; negative count from the end; 0 is an error
    "axis": {"r": 'as_axis({arg}, "{fn}", "{py}")', "shift": 1, "axis": True,
             "doc": " (1-based in R: 1 is the first axis, -1 the last; 0 is an error.)"},
    # the same, sent as a tuple (hashable: jax's rot90 needs it)
    "axis_tuple": {"r": 'as_axis({arg}, "{fn}", "{py}", as_tuple = TRUE)', "shift": 1,
                   "axis": True,
                   "doc": " (1-based in R: 1 is the first axis, -1 the last; 0 is an error.)"},
    # a shape: a tuple of ints, NA for an unknown dimension
    "shape": {"r": 'as_shape({arg}, "{fn}", "{py}")',
              "doc": " (Whole numbers; NA for an unknown dimension.)"},
    # whole numbers -> Python ints (counts, window lengths); a vector -> a tuple
    "int": {"r": 'as_py_int({arg}, "{fn}", "{py}")'},
    # integer tensors given 0-based, as in Keras: whole R doubles become int32
    "index": {"r": "as_index_arg({arg})",
              "doc": " (0-based, as in Keras; whole R doubles become int32.)"},
    # 1-based R indices -> 0-based (negative ones count from the end); 0 is an error
    "index_in": {"r": 'as_index_in({arg}, "{fn}", "{py}", zero_indexed)', "shift": 1,
                 "zero_indexed": True,
                 "doc": " (1-based in R, as in keras3: 1 is the first element, -1 the last;"
                        " 0-based with `zero_indexed = TRUE`.)"},
    # the same, but 0 is allowed (op_switch clamps it to the first branch)
    "switch_index": {"r": 'as_index_in({arg}, "{fn}", "{py}", zero_indexed, allow_zero = TRUE)',
                     "zero_indexed": True,
                     "doc": " (1-based in R, as in keras3: 1 is the first element, -1 the last;"
                            " 0-based with `zero_indexed = TRUE`.)"},
    # a number is a count of sections, a vector 1-based split points
    "split": {"r": 'as_split_arg({arg}, "{fn}", "{py}", zero_indexed)', "zero_indexed": True,
              "doc": " (1-based in R, as in keras3: 1 is the first element, -1 the last;"
                     " 0-based with `zero_indexed = TRUE`.)"},
    # keras3's as_integer(): whole R doubles become integers (keeping dim)
    "integer": {"r": 'as_integer_arg({arg}, "{fn}", "{py}")',
                "doc": " (Whole R doubles become integers, as in keras3.)"},
    # keras3's as_integer_array(): whole R doubles become an int32 array, values as they are
    "int_array": {"r": 'as_int_array_arg({arg}, "{fn}", "{py}")',
                  "doc": " (Whole R doubles become integers, as in keras3.)"},
    # an R list sent as a Python tuple (torch's jvp takes only tuples)
    "tuple": {"r": "as_tuple_arg({arg})"},
}

# Results: what happens to the value the Python op returns.
#   "index_out":        the result is an index: +1 unless zero_indexed
#   "index_out_second": (values, indices) of top_k: the indices +1
#   "nonzero":          one row per nonzero element, its 1-based coordinates (keras3)
RESULTS = {"index_out", "index_out_second", "nonzero"}

# The transformer of each argument name, whatever the op (OPS overrides it per op).
ARGS = {
    **dict.fromkeys([
        "axis", "axis1", "axis2", "axisa", "axisb", "axisc", "source", "destination",
    ], "axis"),
    **dict.fromkeys(["shape", "newshape"], "shape"),
    **dict.fromkeys(["indices", "segment_ids"], "index"),
    **dict.fromkeys([
        "k", "num", "offset", "indices_or_sections", "repeats", "num_classes", "num_segments",
        "length", "sequence_length", "sequence_stride", "fft_length", "minlength", "n", "kth",
        "decimals", "N", "M", "size", "block_size", "pool_size", "strides", "kernel_size",
        "dilation_rate", "dilation", "output_size", "pad_width", "beam_width", "top_paths",
        "output_length", "bins", "maximum_iterations", "stride", "unroll", "mask_index",
        "output_padding", "top_cropping", "left_cropping", "bottom_cropping",
        "right_cropping", "top_padding", "left_padding", "bottom_padding", "right_padding",
        "target_height", "target_width",
        "axes",  # a count in tensordot; an axis where OPS says so (transpose, moments, rot90)
    ], "int"),
    "dtype": "plain",
    # data, options and functions: keras3's conversion of any value
    **dict.fromkeys([
        "a", "abs_", "alpha", "angle", "antialias", "approximate", "array", "assume_unique",
        "atol", "attn_logits_soft_cap", "b", "base", "beta", "bias", "body", "body_fun",
        "branches", "center", "choicelist", "compute_uv", "cond", "condition", "condlist",
        "constant_values", "coordinates", "crop_to_aspect_ratio", "data", "data_format",
        "default_value", "depthwise_kernel", "dx", "elements", "elems", "end_points",
        "endpoint", "epsilon", "equal_nan", "excluded", "f", "false_fn", "fill_mode",
        "fill_value", "filter_sigma", "filter_size", "flash_attention", "from_logits",
        "full_matrices", "fun", "function", "has_aux", "image1", "image2", "images",
        "increasing", "indexing", "init", "init_val", "initial", "inputs", "interpolation",
        "invert", "is_causal", "k1", "k2", "keepdims", "kernel", "key", "loop_vars", "lower",
        "mask", "max_val", "merge_repeated", "method", "mode", "nan", "negative_slope",
        "neginf", "ord", "order", "output", "output_shape", "pad_to_aspect_ratio", "padding",
        "pattern", "pointwise_kernel", "posinf", "pred", "predictions", "pyfunc", "q", "query",
        "range", "rcond", "reduction", "retstep", "return_counts", "return_index",
        "return_inverse", "reverse", "rtol", "scale", "seed", "shift", "side", "sigma",
        "signature", "sorted", "sorted_sequence", "sparse", "spatial_dims", "start",
        "start_points", "stop", "strategy", "subscripts", "synchronized", "target",
        "target_length", "targets", "tensor", "threshold", "tol", "transform", "translation",
        "true_fn", "upper", "value", "values", "variable", "volumes", "weights", "window", "x",
        "x1", "x2", "x_max", "x_min", "xs", "y",
        "min_value", "max_value", "max_norm",  # customgrad.ops
    ], "value"),
}

# R names for Python argument names that R cannot use (R's reserved words get a trailing "_").
R_ARG_NAMES = {"function": "f"}

# The modules wrapped, in the order of the generated files.
#   "python": the module; "key": the prefix of its ops' keys in OPS; "r_prefix": of the R names;
#   "names": "public" (every public function) or "__all__";
#   "out": the generated file; "rdname": the help topic the wrappers share (written by hand),
#   instead of one generated from each docstring.
MODULES = [
    {"python": "keras.ops", "key": "", "r_prefix": "op_", "names": "public",
     "out": "R/ops-generated.R"},
    {"python": "keras.ops.image", "key": "image.", "r_prefix": "op_image_", "names": "public",
     "out": "R/ops-generated.R"},
    {"python": "customgrad.ops", "key": "customgrad.", "r_prefix": "op_", "names": "__all__",
     "out": "R/ops-generated-customgrad.R", "rdname": "customgrad_ops"},
]

# Ops not generated, and why (their R functions are written by hand).
SKIP = {
    "custom_gradient": "R/custom-gradient.R: the forward and grad functions are R functions",
    "convert_to_numpy": "R/convert.R: numpy arrays cannot cross reticulate 1.28, bytes do",
    "arange": "R/ops-keras3.R: 1-based and including the end, as keras3",
    "convert_to_tensor": "R/ops-keras3.R: keras3 converts R vectors to arrays first",
    "array": "R/ops-keras3.R: whole doubles become integers for an integer dtype",
    "customgrad.straight_through": "R/ops-customgrad.R: wraps an R function, not a Python one",
}

# keras3's per-op conventions, read from its R sources (R/ops*.R). Keys are the ops' keys
# (MODULES' "key" + the Python name); each maps a Python argument to a transformer, plus:
#   "@return":    a result convention of RESULTS;
#   "@order":     the R formals in this order (keras3 takes the data first in map, vectorized_map);
#   "@name":      the R name (keras3's op_image_crop for keras.ops.image.crop_images);
#   "@dots":      the transformer of the named arguments in `...` (default "value");
#   "@axis_extra": the axes index the result, this many dimensions more than the input;
#   "@axis_check": False where the axes are not axes of the first argument (no rank check).
OPS = {
    "jvp": {"primals": "tuple", "tangents": "tuple"},
    "argmax": {"x": "array", "@return": "index_out"},
    "argmin": {"@return": "index_out"},
    "argsort": {"@return": "index_out"},
    "argpartition": {"x": "array", "kth": "index_in", "@return": "index_out"},
    "top_k": {"x": "array", "k": "int", "@return": "index_out_second"},
    "searchsorted": {"@return": "index_out"},
    "digitize": {"bins": "array", "@return": "index_out"},
    "nonzero": {"@return": "nonzero"},
    "one_hot": {"x": "index_in", "@axis_check": False},
    "multi_hot": {"inputs": "integer", "@axis_check": False},
    "take": {"indices": "index_in"},
    "take_along_axis": {"indices": "index_in"},
    "scatter": {"indices": "index_in", "values": "array"},
    "scatter_update": {"indices": "index_in", "updates": "array"},
    "slice": {"inputs": "array", "start_indices": "index_in"},
    "slice_update": {"inputs": "array", "start_indices": "index_in", "updates": "array"},
    "segment_sum": {"segment_ids": "index_in"},
    "segment_max": {"segment_ids": "index_in"},
    "unravel_index": {"indices": "index_in"},  # keras3 gives the coordinates 0-based
    "split": {"indices_or_sections": "split"},
    "switch": {"index": "switch_index"},
    "ctc_loss": {"target": "int_array", "mask_index": "index_in"},
    "ctc_decode": {"sequence_lengths": "int_array", "mask_index": "index_in"},
    "bincount": {"x": "integer"},
    "bartlett": {"x": "int"}, "blackman": {"x": "int"}, "hamming": {"x": "int"},
    "hanning": {"x": "int"}, "kaiser": {"x": "int"},
    "bitwise_and": {"x": "integer", "y": "integer"},
    "bitwise_or": {"x": "integer", "y": "integer"},
    "bitwise_xor": {"x": "integer", "y": "integer"},
    "bitwise_invert": {"x": "integer"}, "bitwise_not": {"x": "integer"},
    "bitwise_left_shift": {"x": "integer", "y": "integer"},
    "bitwise_right_shift": {"x": "integer", "y": "integer"},
    "left_shift": {"x": "integer", "y": "integer"},
    "right_shift": {"x": "integer", "y": "integer"},
    "select": {"default": "int"},
    "rot90": {"axes": "axis_tuple"},
    "transpose": {"axes": "axis"},
    "moments": {"axes": "axis"},
    "expand_dims": {"@axis_extra": 1},
    "stack": {"@axis_extra": 1},
    "linspace": {"@axis_check": False},
    "logspace": {"@axis_check": False},
    "batch_normalization": {"mean": "array", "variance": "array", "offset": "array"},
    "layer_normalization": {"gamma": "array", "beta": "array"},
    "correlate": {"x1": "array", "x2": "array"},
    "normalize": {"order": "int"},
    "map": {"@order": ["xs", "f"]},
    "vectorized_map": {"@order": ["elements", "function"]},
    "rearrange": {"@dots": "int"},
    "image.crop_images": {"@name": "op_image_crop"},
    "image.pad_images": {"@name": "op_image_pad"},
    # customgrad.ops: tensors in (as the hand-written wrappers did), and the R names that keep
    # them apart from the plain keras ops of the same Python name
    "customgrad.log1pexp": {"x": "tensor"},
    "customgrad.clip_gradient": {"x": "tensor"},
    "customgrad.clip_gradient_norm": {"x": "tensor"},
    "customgrad.reverse_gradient": {"x": "tensor"},
    "customgrad.scale_gradient": {"x": "tensor"},
    "customgrad.round_ste": {"x": "tensor"},
    "customgrad.sign_ste": {"x": "tensor"},
    "customgrad.safe_norm": {"x": "tensor"},
    "customgrad.safe_sqrt": {"x": "tensor"},
    "customgrad.logsumexp": {"x": "tensor", "@name": "op_safe_logsumexp"},
    "customgrad.swish": {"x": "tensor", "@name": "op_efficient_swish"},
}
