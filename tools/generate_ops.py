"""Generates R/ops-generated.R: one R function op_<name> per function of the pinned keras.ops
(and op_image_<name> for keras.ops.image), with keras3's R conventions.

    .venv/bin/python tools/generate_ops.py            # writes R/ops-generated.R
    .venv/bin/python tools/generate_ops.py OUT.R      # writes OUT.R (the test compares)

Conventions applied to the arguments (see R/convert.R):
  * axis-like arguments are 1-based in R (0 is an error; negative counts from the end);
  * shape arguments become tuples of ints; count-like arguments become ints;
  * the per-op rules of keras3 are in OP_RULES below (1-based indices in and out with
    `zero_indexed`, integer coercions, data-first argument order, keras3's R names);
  * everything else goes through as_tensor_arg(): R scalars become Python scalars, R vectors
    tensors (doubles of the default float dtype), R arrays numpy arrays (doubles float64, as
    reticulate gives them to keras3), R functions Python callables.
The output depends only on the keras version (sorted names, no timestamps), not on the backend.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import sys
import types

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

# Written by hand in R/ (custom gradients, conversion to R arrays).
SKIP = {"custom_gradient", "convert_to_numpy"}  # (and HAND_WRITTEN below)

AXIS_ARGS = {"axis", "axis1", "axis2", "axisa", "axisb", "axisc", "source", "destination"}
AXES_ARE_AXES = {"transpose", "moments", "rot90"}  # elsewhere (tensordot) `axes` is a count
SHAPE_ARGS = {"shape", "newshape"}
INDEX_ARGS = {"indices", "segment_ids"}  # integer tensors: whole R doubles become int32 (0-based)
INT_ARGS = {
    "k", "num", "offset", "indices_or_sections", "repeats", "num_classes", "num_segments",
    "length", "sequence_length", "sequence_stride", "fft_length", "minlength", "n", "kth",
    "decimals", "N", "M", "size", "block_size", "pool_size", "strides", "kernel_size",
    "dilation_rate", "dilation", "output_size", "pad_width", "beam_width", "top_paths",
    "output_length", "bins", "maximum_iterations", "stride", "unroll", "mask_index",
    "output_padding", "axes", "top_cropping", "left_cropping", "bottom_cropping",
    "right_cropping", "top_padding", "left_padding", "bottom_padding", "right_padding",
    "target_height", "target_width",
}
# keras3's per-op conventions, read from its R sources (R/ops*.R). Keys are keras.ops names
# ("image.<name>" for keras.ops.image); each maps a Python argument to a rule, plus:
#   "@return": "index_out" (the result is an index: +1), "index_out_second" (top_k: the second of
#             (values, indices)), "nonzero" (1-based coordinates, one row per nonzero element);
#   "@order": the R formals in this order (keras3 takes the data first in map, vectorized_map);
#   "@name":  the R name (keras3's op_image_crop for keras.ops.image.crop_images).
# Argument rules:
#   "index_in"     1-based R indices -> 0-based (negative ones count from the end); 0 is an error
#   "switch_index" the same, but 0 is allowed (op_switch clamps it to the first branch)
#   "split"        a number is a count of sections, a vector 1-based split points
#   "array"        R vectors become arrays (doubles float64), as keras3's as_array()
#   "integer"      whole R doubles become integers (keeping dim), as keras3's as_integer()
#   "int_array"    whole R doubles become an int32 array, values as they are
#   "int"          whole numbers -> Python ints (window lengths, counts)
#   "axis_tuple"   1-based axes sent as a tuple (hashable: jax's rot90 needs it)
#   "tuple"        an R list sent as a Python tuple (torch's jvp takes only tuples)
# An op with an index rule or an index result gets `zero_indexed = FALSE`, as in keras3:
# TRUE takes and gives 0-based indices.
OP_RULES = {
    "jvp": {"primals": "tuple", "tangents": "tuple"},
    "argmax": {"x": "array", "@return": "index_out"},
    "argmin": {"@return": "index_out"},
    "argsort": {"@return": "index_out"},
    "argpartition": {"x": "array", "kth": "index_in", "@return": "index_out"},
    "top_k": {"x": "array", "k": "int", "@return": "index_out_second"},
    "searchsorted": {"@return": "index_out"},
    "digitize": {"bins": "array", "@return": "index_out"},
    "nonzero": {"@return": "nonzero"},
    "one_hot": {"x": "index_in"},
    "multi_hot": {"inputs": "integer"},
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
    "batch_normalization": {"mean": "array", "variance": "array", "offset": "array"},
    "layer_normalization": {"gamma": "array", "beta": "array"},
    "correlate": {"x1": "array", "x2": "array"},
    "normalize": {"order": "int"},
    "map": {"@order": ["xs", "f"]},
    "vectorized_map": {"@order": ["elements", "function"]},
    "image.crop_images": {"@name": "op_image_crop"},
    "image.pad_images": {"@name": "op_image_pad"},
}
INDEX_RULES = {"index_in", "switch_index", "split"}
# Written by hand in R/ops-keras3.R (keras3 semantics that are not a per-argument rule).
HAND_WRITTEN = {"arange", "convert_to_tensor", "array"}
# Ops whose `axis` indexes the result, one dimension more than the input.
NEW_AXIS_OPS = {"expand_dims", "stack"}
# Ops whose `axis` is an axis of something other than their first argument.
OTHER_AXIS_OPS = {"linspace", "logspace", "one_hot", "multi_hot"}

R_RESERVED = {"function", "if", "else", "repeat", "while", "for", "in", "next", "break", "TRUE",
              "FALSE", "NULL", "Inf", "NaN", "NA"}

BANNER = """\
# Generated by tools/generate_ops.py from keras {version} -- do not edit by hand.
# Regenerate with: .venv/bin/python tools/generate_ops.py
# One R function per function of keras.ops (and keras.ops.image), with keras3's R conventions:
# 1-based axes, integer shapes, R doubles as tensors of the default float dtype.
"""


def r_name(py_name: str, taken: set) -> str:
    if py_name in R_RESERVED:
        return "f" if py_name == "function" and "f" not in taken else py_name + "_"
    return py_name


def r_literal(value, category: str):
    """R source for a Python default, or None if it has no R spelling."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if category in ("axis", "axis_tuple", "index_in") and value >= 0:
            value += 1
        return f"{value}L"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Inf" if value > 0 else "-Inf"
        text = repr(value)
        return text
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool)
                                               for v in value):
        items = [r_literal(v, category) for v in value]
        return "c(" + ", ".join(items) + ")"
    return None


def category(op: str, arg: str) -> str:
    rule = OP_RULES.get(op, {}).get(arg)  # (keys starting with @ are not arguments)
    if rule:
        return rule
    if arg in AXIS_ARGS or (arg == "axes" and op in AXES_ARE_AXES):
        return "axis"
    if arg in SHAPE_ARGS:
        return "shape"
    if arg in INT_ARGS:
        return "int"
    if arg in INDEX_ARGS:
        return "index"
    if arg == "dtype":
        return "plain"
    return "tensor"


def convert_expr(cat: str, rname: str, fn: str, pyname: str) -> str:
    if cat in ("index_in", "switch_index"):
        zero = ", allow_zero = TRUE" if cat == "switch_index" else ""
        return f'as_index_in({rname}, "{fn}", "{pyname}", zero_indexed{zero})'
    if cat == "split":
        return f'as_split_arg({rname}, "{fn}", "{pyname}", zero_indexed)'
    if cat == "array":
        return f"as_array_arg({rname})"
    if cat == "integer":
        return f'as_integer_arg({rname}, "{fn}", "{pyname}")'
    if cat == "int_array":
        return f'as_int_array_arg({rname}, "{fn}", "{pyname}")'
    if cat == "axis_tuple":
        return f'as_axis({rname}, "{fn}", "{pyname}", as_tuple = TRUE)'
    if cat == "tuple":
        return f"as_tuple_arg({rname})"
    if cat == "axis":
        return f'as_axis({rname}, "{fn}", "{pyname}")'
    if cat == "shape":
        return f'as_shape({rname}, "{fn}", "{pyname}")'
    if cat == "int":
        return f'as_py_int({rname}, "{fn}", "{pyname}")'
    if cat == "index":
        return f"as_index_arg({rname})"
    if cat == "plain":
        return rname
    return f"as_tensor_arg({rname})"


# ---- documentation ------------------------------------------------------------------------------

def ascii_text(text: str) -> str:
    replacements = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                    "\u2014": "-", "\u2212": "-", "\u00d7": "x", "\u2264": "<=", "\u2265": ">=",
                    "\u03b1": "alpha", "\u03b2": "beta", "\u03b3": "gamma", "\u03c3": "sigma",
                    "\u03bc": "mu", "\u03b5": "epsilon", "\u2026": "...", "\u00b2": "^2",
                    "\u221a": "sqrt", "\u03c0": "pi", "\u2192": "->", "\u00b7": "*"}
    for k, v in replacements.items():
        text = text.replace(k, v)
    return text.encode("ascii", "replace").decode("ascii")


def rd_escape(text: str) -> str:
    text = ascii_text(text)
    text = text.replace("\\", "\\\\").replace("%", "\\%").replace("{", "\\{").replace("}", "\\}")
    # roxygen's markdown runs inline code that starts with "r " (`r expr`): keep it literal
    text = text.replace("`r ", "` r ")
    # [text] outside code spans would be a markdown link to a help page
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("[", "\\[").replace("]", "\\]")
    text = "`".join(parts)
    return text.replace("@", "@@")


SECTION = re.compile(r"^(Args|Arguments|Returns|Return|Example|Examples|Raises|Note|Notes|"
                     r"Reference|References|Call arguments|Yields|Warning)s?:\s*$")


LIST_ITEM = re.compile(r"^\s*[*-]\s+")


def join_paragraph(p: str) -> str:
    """One line per paragraph, except that a list keeps one line per item (markdown renders
    it as a list; joined, the items run together)."""
    lines = p.split("\n")
    if not any(LIST_ITEM.match(line) for line in lines):
        return " ".join(line.strip() for line in lines)
    intro, items = [], []
    for line in lines:
        if LIST_ITEM.match(line):
            items.append("* " + LIST_ITEM.sub("", line).strip())
        elif items:
            items[-1] += " " + line.strip()
        else:
            intro.append(line.strip())
    out = ([" ".join(intro), ""] if intro else []) + items
    return "\n".join(out)


def parse_docstring(doc: str):
    """(title, description paragraphs, {arg: text}, returns text)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    sections: dict = {"": []}
    current = ""
    for line in lines:
        m = SECTION.match(line.strip()) if not line.startswith(" ") else None
        if m:
            current = m.group(1)
            sections.setdefault(current, [])
            continue
        sections.setdefault(current, []).append(line)
    head = "\n".join(sections.get("", [])).strip()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", head) if p.strip()]
    title = paragraphs[0].replace("\n", " ") if paragraphs else ""
    desc = [join_paragraph(p) for p in paragraphs[1:] if not p.lstrip().startswith(">>>")]
    args = {}
    name = None
    for line in sections.get("Args", []) + sections.get("Arguments", []):
        m = re.match(r"^\s{0,4}(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?:\s*(.*)$", line)
        if m and (len(line) - len(line.lstrip())) <= 4:
            name = m.group(1).lstrip("*")
            args[name] = m.group(3).strip()
        elif name and line.strip():
            args[name] += " " + line.strip()
    returns = " ".join(l.strip() for l in sections.get("Returns", []) + sections.get("Return", [])
                       if l.strip())
    return title, desc, args, returns


def roxygen(fn: str, pyname: str, module: str, params: list, doc: str, version: str,
            rules: dict, has_zero_indexed: bool) -> list:
    title, desc, arg_docs, returns = parse_docstring(doc)
    title = title.rstrip(".") or f"keras.{module}.{pyname}"
    out = [f"#' {rd_escape(title)}", "#'"]
    out.append(f"#' Calls `keras.{module}.{pyname}` (keras {version}) on the active backend.")
    for p in desc[:3]:
        out.append("#'")
        out.extend(f"#' {rd_escape(line)}".rstrip() for line in p.split("\n"))
    out.append("#'")
    for rname, pyarg, cat in params:
        if rname == "...":
            text = "Further arguments, passed on (unnamed ones positionally)."
        else:
            text = arg_docs.get(pyarg, "") or "See the Keras documentation."
            if cat in ("axis", "axis_tuple"):
                text += " (1-based in R: 1 is the first axis, -1 the last; 0 is an error.)"
            elif cat in ("index_in", "switch_index", "split"):
                text += (" (1-based in R, as in keras3: 1 is the first element, -1 the last;"
                         " 0-based with `zero_indexed = TRUE`.)")
            elif cat in ("integer", "int_array"):
                text += " (Whole R doubles become integers, as in keras3.)"
            elif cat == "shape":
                text += " (Whole numbers; NA for an unknown dimension.)"
            elif cat == "index":
                text += " (0-based, as in Keras; whole R doubles become int32.)"
        out.append(f"#' @param {rname} {rd_escape(text)}")
    if has_zero_indexed:
        out.append("#' @param zero_indexed If `TRUE`, indices are 0-based as in Python (taken and "
                   "returned as they are); by default they are 1-based, as in keras3.")
    ret = returns or "A tensor."
    if rules.get("@return") in ("index_out", "index_out_second", "nonzero"):
        ret += " Indices in the result are 1-based unless `zero_indexed = TRUE`."
    out.append(f"#' @return {rd_escape(ret)}")
    out.append("#' @export")
    return out


def generate_one(pyname: str, fn_obj, module: str, version: str) -> str:
    key = pyname if module == "ops" else f"image.{pyname}"
    rules = OP_RULES.get(key, {})
    fn = rules.get("@name") or (f"op_{pyname}" if module == "ops" else f"op_image_{pyname}")
    sig = inspect.signature(fn_obj)
    formals, params = [], []
    positional, keyword_args, drop_null = [], [], []
    dots, dots_int = False, False
    seen_var_positional = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    taken = set(sig.parameters)
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if not dots:
                formals.append("...")
                params.append(("...", None, None))
                dots = True
            if p.kind == p.VAR_KEYWORD and pyname == "rearrange":
                dots_int = True
            continue
        rname = r_name(p.name, taken)
        rsrc = rname if rname.isidentifier() else f"`{rname}`"
        cat = category(key, p.name)
        if p.default is p.empty:
            formals.append(rsrc)
        else:
            lit = r_literal(p.default, cat)
            if lit is None:
                lit = "NULL"
                drop_null.append(p.name)
            formals.append(f"{rsrc} = {lit}")
        params.append((rname, p.name, cat))
        expr = convert_expr(cat, rsrc, fn, p.name)
        before_star = seen_var_positional and p.kind == p.POSITIONAL_OR_KEYWORD and not any(
            q.kind == q.VAR_POSITIONAL for q in list(sig.parameters.values())[
                : list(sig.parameters).index(p.name)])
        if p.kind == p.POSITIONAL_ONLY or before_star:
            positional.append(expr)
        else:
            keyword_args.append((p, expr))
    # Without *args, the leading positional-or-keyword arguments are passed positionally (the same
    # call for Python, and a cheaper one from R: see py_invoke() in R/python.R).
    leading = not dots and not positional
    call_args = []
    for p, expr in keyword_args:
        leading = leading and p.kind == p.POSITIONAL_OR_KEYWORD and p.name not in drop_null
        if leading:
            call_args.append(f"    {expr}")
        else:
            key = f"`{p.name}`" if p.name in R_RESERVED else p.name
            call_args.append(f"    {key} = {expr}")
    has_zero_indexed = bool(
        rules.get("@return") or any(cat in INDEX_RULES for _, _, cat in params))
    if "@order" in rules:  # data first, as keras3
        by_name = dict(zip([pyarg for _, pyarg, _ in params], zip(formals, params)))
        formals = [by_name[n][0] for n in rules["@order"]]
        params = [by_name[n][1] for n in rules["@order"]]
    if has_zero_indexed:
        formals.append("zero_indexed = FALSE")
    lines = roxygen(fn, pyname, module, params, inspect.getdoc(fn_obj) or "", version, rules,
                    has_zero_indexed)
    lines.append(f"{fn} <- function({', '.join(formals)}) {{")
    lines.append("  args <- list(" + ("\n" + ",\n".join(call_args) + "\n  " if call_args else "") + ")")
    if drop_null:
        quoted = ", ".join(f'"{n}"' for n in drop_null)
        lines.append(f"  args <- args[!(names(args) %in% c({quoted}) & vapply(args, is.null, TRUE))]")
    extra = ""
    if module != "ops":
        extra += f', module = "{module.split(".")[-1]}"'
    if positional:
        extra += f", positional = list({', '.join(positional)})"
    if dots:
        extra += ", dots = list(...)"
        if dots_int:
            extra += ", dots_convert = as_py_int"
    # the axis arguments, for an R error naming an out-of-range axis (checked only on failure)
    axis_args = [(rname, pyarg) for rname, pyarg, cat in params
                 if cat in ("axis", "axis_tuple") and rname != "..."]
    first = params[0] if params else None
    if (axis_args and first and first[2] in ("tensor", "array") and first[0] != "..."
            and key not in OTHER_AXIS_OPS and not dots):
        items = ", ".join(f"{pyarg} = {rname}" for rname, pyarg in axis_args)
        extra += f", axes = list({items}), ref = {first[0]}"
        if key in NEW_AXIS_OPS:
            extra += ", axis_extra = 1L"
    call = f'op_call("{pyname}", args, "{fn}"{extra})'
    ret = rules.get("@return")
    if ret == "index_out":
        lines.append(f"  index_out({call}, zero_indexed)")
    elif ret == "index_out_second":
        lines.append(f"  res <- {call}")
        lines.append('  names(res) <- c("values", "indices")')
        lines.append("  res$indices <- index_out(res$indices, zero_indexed)")
        lines.append("  res")
    elif ret == "nonzero":
        lines.append(f"  nonzero_out({call}, zero_indexed)")
    else:
        lines.append(f"  {call}")
    lines.append("}")
    return "\n".join(lines)


def public_functions(module) -> list:
    names = []
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType) or inspect.isclass(obj) or not callable(obj):
            continue
        names.append(name)
    return names


def generate() -> str:
    version = keras.__version__
    chunks = [BANNER.format(version=version)]
    ops_names = [n for n in public_functions(keras.ops) if n not in SKIP | HAND_WRITTEN]
    for name in ops_names:
        chunks.append(generate_one(name, getattr(keras.ops, name), "ops", version))
    for name in public_functions(keras.ops.image):
        chunks.append(generate_one(name, getattr(keras.ops.image, name), "ops.image", version))
    return "\n\n".join(chunks) + "\n"


def main(argv: list) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = argv[1] if len(argv) > 1 else os.path.join(root, "R", "ops-generated.R")
    text = generate()
    with open(out, "w", encoding="ascii") as fh:
        fh.write(text)
    print(f"wrote {out}: {text.count(' <- function(')} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
