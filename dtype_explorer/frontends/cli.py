"""``dtype-explorer``: the same engine from a terminal.

dtype-explorer probe Dense --input-dtype uint8 --policy mixed_float16 --kwargs '{"units": 4}'
dtype-explorer probe Conv1D --input-dtype uint8 --backend all
dtype-explorer probe Dense --input-dtype float64 --policy mixed_float16 --mode model,predict,fit
dtype-explorer survey --targets Dense,Conv1D --backends jax,numpy --out survey.html
dtype-explorer table add --dtypes int8,uint8,float16 --backends jax,torch
dtype-explorer survey --targets ops --input-dtypes float32,int32 --backends numpy --out ops.html
dtype-explorer survey --targets Dense,Conv2D --quantize none,int8 --backends numpy --out q.html
dtype-explorer check model.keras
dtype-explorer bisect Discretization --dtype float32 --backend numpy \
    --kwargs '{"bin_boundaries": [0.5, 1.5, 2.5], "dtype": "float32"}' --versions 3.10.0..3.13.0
dtype-explorer atlas build --targets Dense,ops.add --backends numpy --out atlas/
dtype-explorer atlas diff keras-3.14/atlas.json keras-3.15/atlas.json --out review/
dtype-explorer atlas query "SELECT target, count(*) FROM runs WHERE status != 'ok' GROUP BY 1"

Exit status: 0 when every backend answered (a Keras error is an answer); 1 when a probe was
invalid for Keras, timed out or crashed (the results are printed); 2 for bad input, refused
with one line on stderr before any work. ``--debug`` (before the command) shows tracebacks.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from dtype_explorer import analyses, frontends, records, views
from dtype_explorer.backends import BACKENDS
from dtype_explorer.errors import (
    InvalidSpecError,
    NeedsSample,
    printable,
    received_path,
    strip_ansi,
)
from dtype_explorer.frontends._cli_options import (
    AtlasStoreOption,
    BackendOption,
    CallKwargsOption,
    DtypeArgument,
    EngineOption,
    FloatxOption,
    InputDtypeOption,
    JsonOption,
    KwargsOption,
    LabelsOption,
    LongOption,
    ModesOption,
    NoCacheOption,
    PolicyOption,
    PrecisionOption,
    ProbeEngineOption,
    ProbeQuantizeOption,
    ProbeTimeoutOption,
    QuantizeAxisOption,
    QuantizeOption,
    SampleOption,
    ShapeOption,
    TraceOption,
    Typer,
    ValuesOption,
    arrays_file,
    cluster_client,
    engine_list,
    input_dtype_given,
    json_option,
    model_file,
    names,
    one_line,
    out_path,
    quantize_axis,
    shape_option,
    timeout_option,
)
from dtype_explorer.records import ProbeResult, ProbeSet
from dtype_explorer.runtime import engines, pool
from dtype_explorer.runtime.engines import keras2_display

app = Typer(
    help="See what dtype Keras layers and ops really produce, on every backend.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
_state = {"debug": False, "verbose": False}


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of an error.")] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            envvar="DTYPE_EXPLORER_VERBOSE",
            help="Also show what the workers printed (framework start-up lines, warnings).",
        ),
    ] = False,
) -> None:
    """See what dtype Keras layers and ops really produce, on every backend."""
    _state["debug"] = debug
    _state["verbose"] = verbose


def _fail(error: BaseException | str, code: int = 2) -> None:
    said = strip_ansi(one_line(error))  # Keras's bold, where its words reach the error
    typer.secho(f"error: {printable(said)}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``command``; any error becomes one line on stderr and a non-zero exit (2 for bad
    input, 1 for anything else), or its traceback with ``--debug``."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit, KeyboardInterrupt):
            raise
        except (InvalidSpecError, ValueError, OSError) as error:
            if _state["debug"]:
                raise
            _fail(error)
        except Exception as error:
            if _state["debug"]:
                raise
            _fail(f"{type(error).__name__}: {error} (run with --debug for the traceback)", 1)

    return run


@app.command()
@_user_errors
def probe(
    target: Annotated[
        str, typer.Argument(help="Layer class name (Dense) or ops.<name> (ops.add).")
    ],
    dtype: DtypeArgument = None,
    input_dtype: InputDtypeOption = None,
    policy: PolicyOption = "float32",
    backend: BackendOption = "all",
    kwargs: KwargsOption = "{}",
    shape: ShapeOption = None,
    values: ValuesOption = "default",
    floatx: FloatxOption = None,
    timeout: ProbeTimeoutOption = None,
    no_cache: NoCacheOption = False,
    as_json: JsonOption = False,
    trace: TraceOption = False,
    mode: ModesOption = "call",
    call_kwargs: CallKwargsOption = "{}",
    engine: ProbeEngineOption = None,
    precision: PrecisionOption = None,
    quantize: ProbeQuantizeOption = None,
) -> None:
    """Probe one layer or op and print its cast path and the documented/declared/observed dtypes."""
    # 1. Parse: every option's text, checked before any work.
    input_dtype = input_dtype_given(dtype, input_dtype)
    question = _probe_question(input_dtype, backend, kwargs, shape, values, mode, call_kwargs)
    # 2. Run: every backend (and mode) asked, their workers' output shown with --verbose.
    with frontends._cli_terminal.worker_output(question["backend"], verbose=_state["verbose"]):
        outcome = analyses.probe(
            target,
            **question,
            policy=policy,
            floatx=floatx,
            engine=engine_list(engine),
            precision=precision,
            quantize=quantize,
            timeout=timeout_option(timeout),
            use_cache=not no_cache,
        )
    # 3. Print: each result (JSON or text), then the verdict across them.
    results = list(outcome) if isinstance(outcome, ProbeSet) else [outcome]
    _print_probe(outcome, results, as_json=as_json, trace=trace)
    # 4. Exit: 1 when a backend gave no answer from Keras.
    failed = [r for r in results if r.status in ("invalid", "timeout", "crashed")]
    if failed:
        named = ", ".join(f"{r.backend}: {r.status}" for r in failed)
        _fail(f"no answer from Keras on {named} (see above)", 1)


def _probe_question(
    input_dtype: str | None,
    backend: str,
    kwargs: str,
    shape: str | None,
    values: str,
    mode: str,
    call_kwargs: str,
) -> dict[str, Any]:
    """``probe``'s options parsed into ``analyses.probe``'s arguments (JSON, comma lists)."""
    parsed_kwargs = json_option("--kwargs", kwargs)
    parsed_call_kwargs = json_option("--call-kwargs", call_kwargs)
    given = json_option("--values", values) if values.lstrip().startswith("[") else values
    dtype_names = names("--input-dtype", input_dtype) if input_dtype is not None else None
    backends = backend if backend == "all" else names("--backend", backend)
    parsed_shape = shape_option(shape)
    return {
        "input_dtype": tuple(dtype_names or ()) if dtype_names is not None else None,
        "backend": backends,
        "kwargs": parsed_kwargs,
        "shape": parsed_shape,
        "values": given,
        "mode": mode if "," not in mode else tuple(names("--mode", mode) or ()),
        "call_kwargs": parsed_call_kwargs,
    }


def _print_probe(
    outcome: ProbeResult | ProbeSet, results: list[ProbeResult], *, as_json: bool, trace: bool
) -> None:
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in results], indent=2))
        return
    for result in results:
        typer.echo(printable(views.format_result(result, trace=trace, detail=trace)))
        typer.echo("")
    if isinstance(outcome, ProbeSet) and len(outcome) > 1:
        part = outcome.first_divergence() if trace else None
        if part is not None:
            typer.echo(printable(part.text()))
        frontends._cli_terminal.show(views.probe_set_table(outcome))  # a line per backend, last


@app.command()
@_user_errors
def survey(
    targets: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated targets or patterns: ops, ops.nn.*, Dense (default: all layers)."
        ),
    ] = None,
    input_dtypes: Annotated[str | None, typer.Option(help="Comma-separated input dtypes.")] = None,
    policies: Annotated[str | None, typer.Option(help="Comma-separated policies.")] = None,
    backends: Annotated[
        str | None, typer.Option(help="Comma-separated backends (default: installed).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output file: .html or .json.")] = Path("survey.html"),
    engine: EngineOption = None,
    quantize: QuantizeAxisOption = None,
) -> None:
    """Sweep layers x dtypes x policies x backends and save the map."""
    out_path(out, (".html", ".htm", ".json"))  # before the work, not after it
    with (
        frontends._cli_terminal.framework_output_to_log(verbose=_state["verbose"]) as terminal,
        frontends._cli_terminal.progress_on(terminal) as bars,
    ):
        result = analyses.survey(
            targets=names("--targets", targets),
            input_dtypes=names("--input-dtypes", input_dtypes),
            policies=names("--policies", policies),
            backends=names("--backends", backends),
            engine=engine,
            quantize=quantize_axis(quantize),
            progress=bars,
        )
        result.save(out)
    typer.echo(f"wrote {out} ({len(result.to_frame())} cells)")


@app.command()
@_user_errors
def table(
    op: Annotated[
        str, typer.Argument(help="Any op with one or two inputs: add, where, sqrt, nn.relu, ...")
    ] = "add",
    dtypes: Annotated[
        str | None, typer.Option(help="Comma-separated dtypes (default: all).")
    ] = None,
    backends: Annotated[str | None, typer.Option(help="Comma-separated backends.")] = None,
    floatx: Annotated[
        str | None, typer.Option(help="Resolve weak floats with this floatx.")
    ] = None,
    disagreements: Annotated[
        bool, typer.Option(help="Only the cells where someone disagrees, who says what.")
    ] = False,
    long: LongOption = False,
    engine: EngineOption = None,
) -> None:
    """Print the promotion table of an op: the lhs x rhs grid of Keras's result_type, each
    cell where a backend or reference library disagrees marked."""
    with frontends._cli_terminal.framework_output_to_log(verbose=_state["verbose"]):
        result = analyses.promotion_table(
            op=op,
            dtypes=names("--dtypes", dtypes),
            backends=names("--backends", backends),
            floatx=floatx,
            engine=engine,
        )
    if disagreements or long:
        frame = result.disagreements() if disagreements else result.to_frame()
        typer.echo(frame.to_string() if len(frame) else "no cell where anyone disagrees")
        return
    frontends._cli_terminal.show(views.promotion_grid(result))


@app.command()
@_user_errors
def check(
    model_path: Annotated[Path, typer.Argument(help="A saved Keras model (.keras).")],
    policy: Annotated[
        str | None, typer.Option(help="Check the model as if built under this policy.")
    ] = None,
    backends: Annotated[
        str | None, typer.Option(help="Also compare layers across these backends.")
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            help="How the model runs: call (its eager call), training, predict (the real "
            "model.predict), fit (one real training step on a copy), save (saved and loaded "
            "back: .keras, .h5, SavedModel), dataset (model.predict on a tf.data.Dataset)."
        ),
    ] = "call",
    engine: EngineOption = None,
    quantize: QuantizeOption = None,
    sample: SampleOption = None,
    labels: LabelsOption = None,
) -> None:
    """Audit a saved model for dtype hazards and print the findings with fixes."""
    model_file(model_path)
    given, targets = arrays_file("--sample", sample), arrays_file("--labels", labels)
    requested = names("--backends", backends)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with frontends._cli_terminal.framework_output_to_log(verbose=_state["verbose"]):
        import keras

        try:
            model = keras.saving.load_model(model_path)
        except Exception as error:  # not a model, truncated, corrupt weights, unknown layers
            if _state["debug"]:
                raise
            raise InvalidSpecError(
                f"could not load {received_path(model_path)} as a Keras model: "
                f"{type(error).__name__}: {one_line(error)}"
            ) from None
        try:
            report = analyses.check_model(
                model,
                given,
                labels=targets,
                policy=policy,
                backends=requested,
                mode=mode,
                engine=engine,
                quantize=quantize,
            )
        except NeedsSample as error:  # say what the command line can do
            raise InvalidSpecError(
                f'{error.what}; pass a sample: --sample x.npy (np.save("x.npy", x)), or '
                "save the model with its inputs declared (a keras.Input first, or "
                "model.build(input_shape) before saving)"
            ) from None
    frontends._cli_terminal.show(views.audit_renderables(report))


@app.command()
@_user_errors
def bisect(
    target: Annotated[
        str, typer.Argument(help="Layer class name (Discretization) or ops.<name> (ops.add).")
    ],
    versions: Annotated[
        str,
        typer.Option(
            help="Keras releases: a range such as 3.10.0..3.13.0 (from the package index) "
            "or a comma list 3.10.0,3.12.0; 3.15.1..nightly bisects Keras's main's nightly builds."
        ),
    ],
    input_dtype: Annotated[
        str,
        typer.Option("--input-dtype", "--dtype", help="Input dtype; comma-separated for several."),
    ] = "float32",
    policy: PolicyOption = "float32",
    backend: Annotated[str, typer.Option(help=f"One backend: {', '.join(BACKENDS)}.")] = "numpy",
    kwargs: KwargsOption = "{}",
    mode: Annotated[
        str, typer.Option(help="How it runs: call, training, model, predict, fit, dataset.")
    ] = "call",
    exhaustive: Annotated[
        bool,
        typer.Option(help="Probe every release (every change seen) instead of bisecting."),
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds per probe before giving up.")
    ] = None,
    no_cache: NoCacheOption = False,
    as_json: JsonOption = False,
) -> None:
    """Find the first Keras release where a probe's answer changed (bisecting the releases)."""
    parsed_kwargs = json_option("--kwargs", kwargs)
    with frontends._cli_terminal.worker_output(backend, verbose=_state["verbose"]):
        result = analyses.bisect(
            target,
            tuple(names("--input-dtype", input_dtype) or ()),
            policy,
            backend,
            versions=versions,
            kwargs=parsed_kwargs,
            mode=mode,
            exhaustive=exhaustive,
            progress=not as_json and sys.stderr.isatty(),
            timeout=timeout_option(timeout),
            use_cache=not no_cache,
        )
    typer.echo(result.to_json(indent=2) if as_json else str(result))


engines_app = Typer(help="Engines: other Keras releases, and Keras 2.", no_args_is_help=True)
app.add_typer(engines_app, name="engines")


@engines_app.command("kernel")
@_user_errors
def engines_kernel(
    spec: Annotated[str, typer.Argument(help="tf_keras (or tf_keras==2.X.Y)")] = "tf_keras",
) -> None:
    """Register the Keras 2 Jupyter kernel (created first when missing): in its notebooks
    tf.keras is Keras 2 and dtype_explorer answers with it."""
    engine, where = engines.kernel(spec, progress=sys.stderr.isatty())
    typer.echo(f"kernel {engine.kernel_name!r} ({keras2_display(engine)}) in {where}")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@_user_errors
def run(
    context: typer.Context,
    script: Annotated[Path, typer.Argument(help="The Python script to run.", exists=True)],
    engine: Annotated[str, typer.Option(help="The Keras 2 engine: tf_keras.")] = "tf_keras",
) -> None:
    """Run a script under the Keras 2 engine, as its kernel runs a notebook (tf.keras is
    Keras 2; arguments after the script go to it)."""
    command = engines.script_command(engine, str(script), context.args)
    raise typer.Exit(subprocess.run(command, check=False).returncode)


atlas_app = Typer(
    help="The dtype atlas: the whole map as a Parquet store, a JSON export and a static site; "
    "its diff and SQL queries.",
    no_args_is_help=True,
)
app.add_typer(atlas_app, name="atlas")


@atlas_app.command("build")
@_user_errors
def atlas_build(
    targets: Annotated[
        str | None,
        typer.Option(help="Comma-separated targets or patterns: layers, ops, ops.nn.*, Dense."),
    ] = None,
    backends: Annotated[
        str | None, typer.Option(help="Comma-separated backends (default: installed).")
    ] = None,
    input_dtypes: Annotated[str | None, typer.Option(help="Comma-separated input dtypes.")] = None,
    policies: Annotated[str | None, typer.Option(help="Comma-separated policies.")] = None,
    out: Annotated[
        Path, typer.Option(help="Directory for atlas.json, index.html and targets/.")
    ] = Path("atlas"),
    cluster: Annotated[
        str | None,
        typer.Option(help="A Dask scheduler's address (tcp://host:8786) to spread the probes."),
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds per probe.")] = None,
    workers_per_backend: Annotated[
        str | None,
        typer.Option(help="Workers per backend: a number, or auto (from the cores and memory)."),
    ] = None,
    engine: EngineOption = None,
    quantize: QuantizeAxisOption = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Survey the map and write the atlas; run it again to resume (answers are cached)."""
    if workers_per_backend is not None:
        count = workers_per_backend.strip()
        pool.configure(workers_per_backend=int(count) if count.isdigit() else count)
    directory = analyses.writable_directory(out)  # before the work, not after it
    client = cluster_client(cluster) if cluster else None
    try:
        with (
            frontends._cli_terminal.framework_output_to_log(verbose=_state["verbose"]) as terminal,
            frontends._cli_terminal.progress_on(terminal, enabled=progress) as bars,
        ):
            written = analyses.write_atlas(
                targets=names("--targets", targets),
                input_dtypes=names("--input-dtypes", input_dtypes),
                policies=names("--policies", policies),
                backends=names("--backends", backends),
                engine=engine,
                quantize=quantize_axis(quantize),
                out=directory,
                timeout=timeout_option(timeout),
                cluster=client,
                progress=bars,
            )
    finally:
        if client is not None:
            client.close()
    counts = " · ".join(f"{k} {v}" for k, v in written.counts.items())
    typer.echo(f"wrote {written.index} ({written.cells} cells: {counts})")


@atlas_app.command("diff")
@_user_errors
def atlas_diff(
    before: Annotated[
        Path, typer.Argument(help="The first atlas.parquet or atlas.json (or its directory).")
    ],
    after: Annotated[
        Path, typer.Argument(help="The second atlas.parquet or atlas.json (or its directory).")
    ],
    out: Annotated[Path, typer.Option(help="Directory for diff.html and diff.json.")] = Path(
        "atlas-diff"
    ),
    fail_on_change: Annotated[
        bool, typer.Option(help="Exit 1 when any cell changed (for CI).")
    ] = False,
) -> None:
    """Every cell whose outcome changed between two atlases, grouped by kind of change."""
    old, new = records.Atlas.load(before), records.Atlas.load(after)
    directory = analyses.writable_directory(out)
    diff = old.diff(new)
    (directory / "diff.json").write_text(diff.to_json(), encoding="utf-8")
    (directory / "diff.html").write_text(diff.to_html(), encoding="utf-8")
    counts = " · ".join(f"{k} {v}" for k, v in diff.counts().items()) or "no cell changed"
    typer.echo(f"{len(diff.changes)} changed runs in {diff.cells_compared} cells: {counts}")
    typer.echo(f"wrote {directory / 'diff.html'} and {directory / 'diff.json'}")
    if fail_on_change and diff.changes:
        raise typer.Exit(1)


@atlas_app.command("query")
@_user_errors
def atlas_query(
    sql: Annotated[
        str,
        typer.Argument(
            help="DuckDB SQL over the table runs, one row per run: target, input_dtype, "
            "policy, run, status, outcome, classification, output_dtype, verdict, ..."
        ),
    ],
    atlas: AtlasStoreOption = Path("atlas"),
    as_json: JsonOption = False,
) -> None:
    """Query an atlas's runs with SQL (DuckDB over atlas.parquet) and print the rows."""
    frame = analyses.query_atlas(sql, atlas)
    if as_json:
        typer.echo(frame.to_json(orient="records", indent=2))
        return
    typer.echo(
        frame.to_string(index=False) if len(frame) else f"no rows ({len(frame.columns)} columns)"
    )


if __name__ == "__main__":
    app()
