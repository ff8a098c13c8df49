"""The command line's options: the ones several commands share, typed once (``Annotated``
with their help), and the parsing every command's text goes through, checked before any
work with a one-line error that says what was received.

>>> names("--backends", "jax, numpy"), shape_option("2x8x3"), shape_option("(2, 4), (2, 4)")
(['jax', 'numpy'], (2, 8, 3), ((2, 4), (2, 4)))
>>> names("--backends", ",")
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: --backends names nothing; received: ','
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
import typer.core

from dtype_explorer.backends import BACKENDS
from dtype_explorer.errors import InvalidSpecError, received, received_path
from dtype_explorer.keras_run import MAX_KWARGS_DEPTH
from dtype_explorer.shapes import SHAPE_SYNTAX, parse_shapes

#: Suffixes ``keras.saving.load_model`` reads.
MODEL_SUFFIXES = (".keras", ".h5", ".hdf5")
#: The longest error line printed.
MAX_LINE = 400

# ------------------------------------------------------------------------------ the app


def _flags_take_no_value(params: list[Any]) -> list[Any]:
    """``params`` with each flag's value type left out of ``--help``: typer prints ``<bool>``
    beside every option, flags (``--debug``, ``--help``) included, as if they took a value;
    an empty metavar prints nothing there (a flag never shows its metavar anywhere else)."""
    for param in params:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.metavar = param.metavar or ""
    return params


class _Command(typer.core.TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_take_no_value(super().get_params(ctx))


class _Group(typer.core.TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_take_no_value(super().get_params(ctx))


class Typer(typer.Typer):
    """``typer.Typer`` whose groups and commands show flags as flags in ``--help``
    (``--debug``, never ``--debug <bool>``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_Group, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        return super().command(*args, cls=kwargs.pop("cls", None) or _Command, **kwargs)


# ------------------------------------------------------------------------------ options

#: ``--engine`` on every command that asks Keras a question.
EngineOption = Annotated[
    str | None,
    typer.Option(
        help="Which Keras answers: keras==3.X.Y (a Keras 3 release, created on first use from "
        "the package index), nightly (Keras's main: the newest keras-nightly build, named by "
        "its version and date) or tf_keras (Keras 2, tensorflow only; not for table and check, "
        "which need keras.ops or Keras 3 layers); default: the installed Keras."
    ),
]
ProbeEngineOption = Annotated[
    str | None,
    typer.Option(
        help="Which Keras answers: keras==3.X.Y (a release, created on first use from the "
        "package index), nightly (Keras's main: the newest keras-nightly build, named by its "
        "version and date) or tf_keras (Keras 2, tensorflow only); a comma list asks each, side "
        "by side (3.15.1,nightly: is it fixed on main?; installed: the installed Keras); "
        "default: the installed Keras."
    ),
]
PolicyOption = Annotated[str, typer.Option(help="Dtype policy: float32, mixed_float16, ...")]
#: ``check --quantize``: audit a quantized copy of the model.
QuantizeOption = Annotated[
    str | None,
    typer.Option(
        help="Audit a quantized copy: int8, float8, int4 or int4/<block size> (the modes of "
        "the installed Keras); per layer: quantized or skipped, stored dtypes and bytes, "
        "compute path, error against the float model."
    ),
]
#: ``probe --quantize``: the layer quantized before the call.
ProbeQuantizeOption = Annotated[
    str | None,
    typer.Option(
        "--quantize",
        help="Quantize the layer before the call as Model.quantize does: int8, int4, "
        "int4/<block size> or float8 (the answering release's modes); shows the stored "
        "variables and the compute path.",
    ),
]
#: ``survey --quantize`` and ``atlas build --quantize``: a quantize axis (``quantize_axis``).
QuantizeAxisOption = Annotated[
    list[str] | None,
    typer.Option(
        "--quantize",
        help="Also survey each layer quantized as Model.quantize does: int8, int4, "
        "int4/<block size> or float8; a comma list or repeated, none for the float layer "
        "(e.g. --quantize none,int8). Cells sit on the policy axis as "
        "<policy>+quantize=<mode>; ops are surveyed unquantized; a layer Keras cannot "
        "quantize (Conv2D) answers its refusal.",
    ),
]
PrecisionOption = Annotated[
    str | None,
    typer.Option(
        help="float32 matmul precision during the probe: highest (TF32 off), tf32, or "
        "default (each backend's own); left out: as the backend has it."
    ),
]
KwargsOption = Annotated[str, typer.Option(help="Constructor kwargs as a JSON object.")]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Run live even if cached.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
#: ``table``'s long format: one row per pair, every backend's and library's answer a column.
LongOption = Annotated[
    bool,
    typer.Option(
        "--long", help="One row per pair, every backend's and library's answer (a wide frame)."
    ),
]
#: ``atlas query``'s store.
AtlasStoreOption = Annotated[
    Path,
    typer.Option(
        "--atlas", help="The atlas.parquet to query, or the directory `atlas build` wrote."
    ),
]
# ``probe``'s own argument and options.
#: ``probe``'s second argument: the input dtype, as ``dx.probe``'s (:func:`input_dtype_given`).
DtypeArgument = Annotated[
    str | None,
    typer.Argument(
        help="The input dtype, as --input-dtype takes it (as dx.probe's second argument): "
        "probe Dense float16.",
        show_default=False,
    ),
]
InputDtypeOption = Annotated[
    str | None,
    typer.Option(
        help="Input dtype; comma-separated for several inputs (default float32, or the "
        "dtypes of --values given as JSON)."
    ),
]
BackendOption = Annotated[str, typer.Option(help=f"{', '.join(BACKENDS)}, a comma list, or all.")]
ShapeOption = Annotated[
    str | None,
    typer.Option(
        metavar="SHAPE",
        help="Input shape: 2x8x3, (2, 8, 3) or [2, 8, 3] (batch first); one per input: "
        "2x4,2x4 or [[2, 4], [2, 4]] (default: the catalog's).",
    ),
]
ValuesOption = Annotated[
    str,
    typer.Option(
        help="Value preset (default, image, large, tiny, edge), or your values as a JSON "
        "list, one per input: '[[2, 3], [-1, -2]]'."
    ),
]
FloatxOption = Annotated[str | None, typer.Option(help="Run under keras.config.set_floatx(...).")]
ProbeTimeoutOption = Annotated[
    float | None,
    typer.Option(help="Seconds per backend before giving up (default: the pool's, 60)."),
]
TraceOption = Annotated[
    bool,
    typer.Option("--trace", help="Show every op of the call: dtypes, the line that ran it, links."),
]
ModesOption = Annotated[
    str,
    typer.Option(help="How it runs: call, training, model, predict, fit, dataset; a comma list."),
]
CallKwargsOption = Annotated[
    str, typer.Option(help="A layer call's kwargs as a JSON object: '{\"training\": true}'.")
]

# ------------------------------------------------------------------------------ parsing


def split(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value is not None else None


def file_size(path: Path) -> int:
    """``path``'s size in bytes, ``0`` when it cannot be read."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def one_line(error: BaseException | str) -> str:
    """An error as one line, cut to ``MAX_LINE`` characters."""
    text = re.sub(r"\s+", " ", str(error)).strip() or type(error).__name__
    return text if len(text) <= MAX_LINE else text[:MAX_LINE] + " ..."


def timeout_option(value: float | None) -> float | None:
    if value is not None and (math.isnan(value) or value <= 0):
        raise InvalidSpecError(
            f"--timeout must be a positive number of seconds (inf: no limit); received: {value}"
        )
    return value


def engine_list(value: str | None) -> str | list[str | None] | None:
    """``--engine``: one engine's name, or a comma list of them (``installed``: ``None``).

    >>> engine_list("nightly"), engine_list("3.15.1, nightly"), engine_list("installed,nightly")
    ('nightly', ['3.15.1', 'nightly'], [None, 'nightly'])
    """
    if value is None or "," not in value:
        return value
    found = names("--engine", value) or []
    return [None if name.lower() == "installed" else name for name in found]


def input_dtype_given(positional: str | None, option: str | None) -> str | None:
    """The input dtype ``probe`` was given: as its second argument (``probe Dense float16``,
    as ``dx.probe``'s) or as ``--input-dtype``; both, only where they say the same.

    >>> input_dtype_given("float16", None), input_dtype_given(None, "uint8")
    ('float16', 'uint8')
    """
    if positional is not None and option is not None and positional != option:
        raise InvalidSpecError(
            f"the input dtype is given twice, as {received(positional)} and as --input-dtype "
            f"{received(option)}: give it once"
        )
    return option if option is not None else positional


def names(option: str, value: str | None) -> list[str] | None:
    found = split(value)
    if found is not None and not found:
        raise InvalidSpecError(f"{option} names nothing; received: {received(value)}")
    return found


def quantize_axis(given: list[str] | None) -> list[str | None] | None:
    """``--quantize none,int8 --quantize int4`` as ``dx.survey``'s ``quantize``: each entry of
    each comma list, ``none`` the float layer (``None``: the option was not given).

    >>> quantize_axis(["none,int8", "int4/32"]), quantize_axis(None)
    ([None, 'int8', 'int4/32'], None)
    """
    if given is None:
        return None
    modes: list[str | None] = []
    for value in given:
        entries = split(value)
        if not entries:
            raise InvalidSpecError(
                f"--quantize names nothing; received: {received(value)}; valid: none, int8, "
                "int4, int4/<block size>, float8 (e.g. --quantize none,int8)"
            )
        modes += [None if entry.lower() == "none" else entry for entry in entries]
    return modes


def shape_option(shape: str | None) -> tuple[int, ...] | tuple[tuple[int, ...], ...] | None:
    """``--shape`` in the one shape syntax (``shapes.parse_shapes``): one shape as a tuple,
    several (one per input) as a tuple of them."""
    if shape is None:
        return None
    try:
        shapes = parse_shapes(shape)
    except InvalidSpecError as error:
        said = str(error).removeprefix("shape: ")
        raise InvalidSpecError(f"--shape: {said}") from None
    if shapes is None:
        raise InvalidSpecError(
            f"--shape names nothing; received: {received(shape)}; valid: {SHAPE_SYNTAX}"
        )
    return shapes[0] if len(shapes) == 1 else shapes


def out_path(out: Path, suffixes: tuple[str, ...]) -> Path:
    """``out`` checked before any work: a writable file in an existing folder, by suffix."""
    if out.suffix.lower() not in suffixes:
        raise InvalidSpecError(
            f"--out must end in {' or '.join(suffixes)}; received: {received_path(out)}"
        )
    if out.is_dir():
        raise InvalidSpecError(f"--out is a folder, not a file: {received_path(out)}")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidSpecError(f"--out: no such folder {received_path(folder)}")
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise InvalidSpecError(f"--out: cannot write {received_path(out)}")
    return out


def model_file(path: Path) -> Path:
    """``path`` checked to be a regular file Keras can read (never a FIFO or a device: reading
    one would block or never end)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise InvalidSpecError(f"no such file: {received_path(path)}") from None
    if not stat.S_ISREG(mode):
        raise InvalidSpecError(
            f"not a regular file (a folder, FIFO or device): {received_path(path)}; "
            f"give a saved model ({', '.join(MODEL_SUFFIXES)})"
        )
    if path.suffix.lower() not in MODEL_SUFFIXES:
        raise InvalidSpecError(
            f"{received_path(path)} is not a saved Keras model: expected "
            f"{', '.join(MODEL_SUFFIXES)}"
        )
    return path


#: The files ``--sample`` and ``--labels`` read: NumPy's own formats, read without pickle.
ARRAY_SUFFIXES = (".npy", ".npz")

SampleOption = Annotated[
    Path | None,
    typer.Option(
        help="The sample to audit on: a .npy file (np.save; one input), or a .npz file "
        "(np.savez: one array per input, named as the model's keras.Input names, or in "
        "order). Read without pickle: numeric or string arrays. Default: a sample in each "
        "keras.Input's shape and dtype."
    ),
]
LabelsOption = Annotated[
    Path | None,
    typer.Option(help="With --mode fit: the targets of the training step, a .npy or .npz file."),
]


def arrays_file(option: str, path: Path | None) -> Any:
    """The arrays a ``--sample``/``--labels`` file holds: a ``.npy`` file's array; a ``.npz``
    file's one array, its arrays in order (``np.savez(f, a, b)``: ``arr_0``, ``arr_1``), or by
    name (``np.savez(f, ids=..., mask=...)``: a dict, as a model of named inputs takes it).
    Read without pickle, so a file can run no code. ``None`` where the option was not given.

    Args:
        option: the option's name, for the messages (``"--sample"``).
        path: the file given.

    Returns:
        An array, a list of arrays, a dict of arrays, or ``None``.
    """
    if path is None:
        return None
    try:
        mode = path.stat().st_mode
    except OSError:
        raise InvalidSpecError(f"{option}: no such file: {received_path(path)}") from None
    if not stat.S_ISREG(mode) or path.suffix.lower() not in ARRAY_SUFFIXES:
        raise InvalidSpecError(
            f"{option} takes a .npy file (np.save) or a .npz file (np.savez); received: "
            f"{received_path(path)}"
        )
    try:
        if path.suffix.lower() == ".npy":
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as held:
            names = list(held.files)
            arrays = {name: held[name] for name in names}
    except Exception as error:  # not NumPy's format, or an object array (pickled)
        raise InvalidSpecError(
            f"{option}: could not read {received_path(path)} as NumPy arrays: "
            f"{type(error).__name__}: {one_line(error)} (it is read without pickle: save "
            "numeric or string arrays)"
        ) from None
    if len(names) == 1:
        return arrays[names[0]]
    if names == [f"arr_{i}" for i in range(len(names))]:
        return [arrays[n] for n in names]
    return arrays


def json_option(option: str, text: str) -> Any:
    """An option's JSON text, parsed; a clear error when it is not JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidSpecError(f"{option} nest deeper than {MAX_KWARGS_DEPTH} levels") from None
    except ValueError as error:  # JSONDecodeError says where, not what: nothing long
        raise InvalidSpecError(f"{option} is not valid JSON: {error}") from None


def cluster_client(address: str) -> Any:
    """``--cluster``: a Dask client of the scheduler at ``address``, or a clear error."""
    try:
        from distributed import Client
    except ImportError:
        raise InvalidSpecError(
            "--cluster needs Dask distributed: pip install 'dtype-explorer[cluster]'"
        ) from None
    try:
        return Client(address, timeout="20s")
    except OSError as error:
        raise InvalidSpecError(
            f"--cluster: no Dask scheduler answered at {received(address)}: {one_line(error)}"
        ) from None
