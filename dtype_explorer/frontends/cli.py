"""``dtype-explorer``: the same engine from a terminal.

dtype-explorer probe Dense --input-dtype uint8 --policy mixed_float16 --kwargs '{"units": 4}'
dtype-explorer probe Conv1D --input-dtype uint8 --backend all
dtype-explorer survey --targets Dense,Conv1D --backends jax,numpy --out survey.html
dtype-explorer table add --dtypes int8,uint8,float16 --backends jax,torch
dtype-explorer survey --targets ops --input-dtypes float32,int32 --backends numpy --out ops.html
dtype-explorer check model.keras
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from dtype_explorer import analyses
from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import ProbeSet

app = typer.Typer(
    help="See what dtype Keras layers and ops really produce, on every backend.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _split(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _fail(error: Exception) -> None:
    typer.secho(f"error: {error}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


@app.command()
def probe(
    target: Annotated[
        str, typer.Argument(help="Layer class name (Dense) or ops.<name> (ops.add).")
    ],
    input_dtype: Annotated[
        str, typer.Option(help="Input dtype; comma-separated for several inputs.")
    ] = "float32",
    policy: Annotated[
        str, typer.Option(help="Dtype policy: float32, mixed_float16, ...")
    ] = "float32",
    backend: Annotated[
        str, typer.Option(help="jax, tensorflow, torch, numpy, a comma list, or all.")
    ] = "all",
    kwargs: Annotated[str, typer.Option(help="Constructor kwargs as a JSON object.")] = "{}",
    shape: Annotated[
        str | None, typer.Option(help="Input shape, e.g. 2,8,3 (batch first).")
    ] = None,
    values: Annotated[
        str, typer.Option(help="Value preset: default, image, large, tiny.")
    ] = "default",
    floatx: Annotated[
        str | None, typer.Option(help="Run under keras.config.set_floatx(...).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(help="Seconds per backend before giving up (default: the pool's, 60)."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Run live even if cached.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Probe one layer or op and print its cast path and the documented/declared/observed dtypes."""
    try:
        parsed_kwargs = json.loads(kwargs)
    except json.JSONDecodeError as error:
        _fail(InvalidSpecError(f"--kwargs is not valid JSON: {error}"))
    backends = backend if backend == "all" else _split(backend)
    try:
        outcome = analyses.probe(
            target,
            input_dtype=tuple(_split(input_dtype) or ["float32"]),
            policy=policy,
            backend=backends,
            kwargs=parsed_kwargs,
            shape=tuple(int(d) for d in _split(shape)) if shape else None,
            values=values,
            floatx=floatx,
            timeout=timeout,
            use_cache=not no_cache,
        )
    except (InvalidSpecError, ValueError) as error:
        _fail(error)
    results = list(outcome) if isinstance(outcome, ProbeSet) else [outcome]
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in results], indent=2))
        return
    for result in results:
        typer.echo(str(result))
        typer.echo("")
    if isinstance(outcome, ProbeSet):
        typer.echo(f"across backends: {outcome.verdict}")


@app.command()
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
) -> None:
    """Sweep layers x dtypes x policies x backends and save the map."""
    try:
        result = analyses.survey(
            targets=_split(targets),
            input_dtypes=_split(input_dtypes),
            policies=_split(policies),
            backends=_split(backends),
        )
    except (InvalidSpecError, ValueError) as error:
        _fail(error)
    result.save(out)
    typer.echo(f"wrote {out} ({len(result.to_frame())} cells)")


@app.command()
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
        bool, typer.Option(help="Only the cells where someone disagrees.")
    ] = False,
) -> None:
    """Print the promotion table of an op: Keras's result_type vs each backend and reference."""
    try:
        result = analyses.promotion_table(
            op=op, dtypes=_split(dtypes), backends=_split(backends), floatx=floatx
        )
    except (InvalidSpecError, ValueError) as error:
        _fail(error)
    frame = result.disagreements() if disagreements else result.to_frame()
    typer.echo(frame.to_string())


@app.command()
def check(
    model_path: Annotated[Path, typer.Argument(help="A saved Keras model (.keras).")],
    policy: Annotated[
        str | None, typer.Option(help="Check the model as if built under this policy.")
    ] = None,
    backends: Annotated[
        str | None, typer.Option(help="Also compare layers across these backends.")
    ] = None,
) -> None:
    """Audit a saved model for dtype hazards and print the findings with fixes."""
    if not model_path.exists():
        _fail(InvalidSpecError(f"no such file: {model_path}"))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    try:
        model = keras.saving.load_model(model_path)
        report = analyses.check_model(model, policy=policy, backends=_split(backends))
    except (InvalidSpecError, ValueError) as error:
        _fail(error)
    typer.echo(str(report))


if __name__ == "__main__":
    app()
