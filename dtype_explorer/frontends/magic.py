"""``%dtype_check``: the model audit as an IPython line magic; ``%%dtype_trace``: the user's own
cell run as written in this kernel with every dtype step inside it shown (``dx.trace``'s).

>>> %load_ext dtype_explorer                                  # doctest: +SKIP
>>> report = %dtype_check model --policy mixed_float16       # doctest: +SKIP

The traced cell runs as the user's: in the user's namespace, on the kernel's backend, changing
what it changes untraced (only ``--policy``/``--floatx`` are put back). A syntax error is shown
as IPython shows the user's; an error the cell raises is the user's, shown with the user's own
traceback and the steps up to it; ``--timeout`` stops a cell that runs too long and
``sys.exit()`` is answered, and the kernel goes on.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from dtype_explorer.analyses import check_model
from dtype_explorer.errors import InvalidSpecError, NeedsSample, as_sentence, received
from dtype_explorer.frontends._trace_cell import trace_cell
from dtype_explorer.frontends.widget import DtypeExplorer


@magics_class
class DtypeMagics(Magics):
    @magic_arguments()
    @argument(
        "model",
        nargs="?",
        help="the Keras model or layer to check: a name (or expression) in the namespace",
    )
    @argument(
        "--sample",
        metavar="NAME",
        help="a variable holding the input to run (default: built from model.inputs)",
    )
    @argument(
        "--policy",
        metavar="P",
        help="check a copy of the model with every layer under dtype policy P",
    )
    @argument(
        "--backends",
        metavar="B",
        help="'all' or a comma-separated list of backends on which to re-run the layers "
        "fed integer or 64-bit data",
    )
    @argument(
        "--mode",
        metavar="M",
        default="call",
        help="how the model runs: call (its eager call, the default), training "
        "(training=True), predict (the real model.predict: compiled on jax and tensorflow), "
        "fit (one real training step on a copy: gradients, loss scaling), save (saved and "
        "loaded back: .keras, .h5, SavedModel; every difference a finding), dataset (the "
        "real model.predict on a tf.data.Dataset of the sample)",
    )
    @argument(
        "--quantize",
        metavar="Q",
        help="audit a quantized copy: int8, float8, int4 or int4/<block size>; per layer "
        "what quantize() did, stored dtypes and bytes, compute path, error against float",
    )
    @argument(
        "--labels",
        metavar="NAME",
        help="a variable holding the targets of the --mode fit step (default: zeros fitting "
        "the output and the loss)",
    )
    @argument(
        "--steps",
        metavar="N",
        help="with --mode fit, how many training steps the copy runs (1 to 1000, default 1): "
        "each step's loss, loss scale, skipped steps and inf/NaN gradients, drawn by "
        "report.figure()",
    )
    @argument(
        "--engine",
        metavar="E",
        help="audit with another Keras release (keras==3.X.Y: the model rebuilt from its "
        "config in that release's worker; created on first use)",
    )
    @argument(
        "--widget",
        action="store_true",
        help="show the audit in the explorer's model view: the model's graph (layers coloured "
        "by compute dtype, edges by tensor dtype, findings on their layer) beside its table; "
        "returns the explorer (its .report is the AuditReport)",
    )
    @argument("-h", "--help", action="store_true", help="show this help")
    @line_magic
    def dtype_check(self, line: str) -> Any:
        """Walk a Keras model through one real forward pass and show where dtypes change,
        which changes are hazards, and the fix for each.

        Returns the ``AuditReport`` (``report = %dtype_check model``): ``.findings``,
        ``.to_frame()``, ``.to_json()``; it renders as a table in notebooks. With ``--widget``,
        the explorer showing it as a graph beside its table (``dx.DtypeExplorer(audit=report)``;
        its ``.report`` is the report). The model's weights, its policy and Keras's global
        settings are left as they were.

        Examples::

            %dtype_check model
            %dtype_check model --sample x_batch --policy mixed_float16
            %dtype_check model --backends all
            %dtype_check model --mode predict
            %dtype_check model --mode fit --sample x_batch --labels y_batch
            %dtype_check model --mode fit --steps 50
            %dtype_check model --engine keras==3.11.3
            %dtype_check model --quantize int8
            %dtype_check model --mode save
            %dtype_check model --widget
        """
        try:
            args = parse_argstring(self.dtype_check, line)
        except ValueError as error:  # shlex: unbalanced quotes, a lone escape
            raise UsageError(
                f"%dtype_check: cannot read the arguments ({error}); received: {received(line)}"
            ) from None
        if args.help or not args.model:
            print(self.dtype_check.__doc__)
            return None
        model = self._lookup(args.model, "model")
        sample = None if args.sample is None else self._lookup(args.sample, "--sample")
        labels = None if args.labels is None else self._lookup(args.labels, "--labels")
        try:
            report = check_model(
                model,
                sample,
                policy=args.policy,
                backends=args.backends,
                mode=args.mode,
                labels=labels,
                engine=args.engine,
                quantize=args.quantize,
                steps=_steps(args.steps),
            )
        except NeedsSample as error:
            raise UsageError(
                f"%dtype_check: {error.what}; pass a sample: %dtype_check {args.model} --sample x"
            ) from None
        except InvalidSpecError as error:
            raise UsageError(f"%dtype_check: {error}") from None
        except (ValueError, TypeError) as error:  # a sample NumPy or Keras cannot read
            if sample is None:
                raise
            raise UsageError(
                f"%dtype_check: --sample {received(args.sample)} cannot be fed to the model: "
                f"{type(error).__name__}: {as_sentence(str(error))}"
            ) from None
        if not args.widget:
            return report
        return DtypeExplorer(audit=report)

    @magic_arguments()
    @argument(
        "--backend",
        metavar="B",
        help="'all' or a comma-separated list: the cell's source run in each backend's "
        "user-code worker, the names it reads sent as values, the answers side by side "
        "(default: this kernel, its backend)",
    )
    @argument(
        "--engine",
        metavar="E",
        help="another Keras 3 release (keras==3.X.Y): the cell's source run in that release's "
        "user-code worker (on this kernel's backend, or each --backend), the names it reads "
        "sent as values; created on first use",
    )
    @argument("--policy", metavar="P", help="a global dtype policy for the cell, put back after")
    @argument("--floatx", metavar="F", help="keras.config.floatx for the cell, put back after")
    @argument(
        "--precision",
        metavar="P",
        help="the float32 matmul precision for the cell, put back after: highest, tf32 or "
        "default (dx.probe's precision=; jax, torch and tensorflow; numpy and openvino have "
        "none)",
    )
    @argument(
        "--eager",
        action="store_true",
        help="run the backend's compiled functions (jax.jit, tf.function, torch.compile) op "
        "by op for the cell, put back after: the steps inside Keras's predict/fit and "
        "keras-hub's generate() are traced with their values",
    )
    @argument("--max-steps", metavar="N", type=int, default=0, help="the most steps kept (300)")
    @argument("--timeout", metavar="S", type=float, help="stop the cell after S seconds")
    @cell_magic
    def dtype_trace(self, line: str, cell: str) -> Any:
        """Run the cell as written, in this kernel, and show every dtype step inside it:
        every keras.ops call, layer __call__, autocast, variable creation and assignment,
        optimizer step, loss scaling, NumPy-to-tensor conversion and Python operator on
        Keras tensors, each with its dtypes, shapes and the cell's line that caused it.

        Returns the ``TraceResult`` (``.steps``, ``.returned``, ``.error``, ``.to_json()``);
        it renders as a card. The cell's names stay set in the namespace, as untraced.

        Examples::

            %%dtype_trace
            y = keras.utils.to_categorical(np.ones(2), 2)

            %%dtype_trace --policy mixed_float16 --timeout 30
            model(x)

            %%dtype_trace --engine keras==3.11.3
            keras.layers.Discretization(bin_boundaries=[0.5, 1.5], dtype="float32")(x)

            %%dtype_trace --backend jax --precision highest
            keras.ops.matmul(a, b)

            %%dtype_trace --eager --policy mixed_bfloat16
            lm.generate(prompt, max_length=16)

        There is no --mode: a cell runs as written, so training, predict, fit or save are
        the cell's own calls (model(x, training=True), model.predict(x), ...).
        """
        try:
            args = parse_argstring(self.dtype_trace, line)
        except (ValueError, UsageError) as error:  # shlex, or an option argparse refused
            raise UsageError(
                f"%%dtype_trace: cannot read the arguments ({error}); received: {received(line)}; "
                "valid: --backend, --engine, --policy, --floatx, --precision, --eager, "
                "--max-steps, --timeout"
            ) from None
        return trace_cell(self.shell, cell, args)

    def _lookup(self, expression: str, what: str) -> Any:
        namespace = self.shell.user_ns
        if expression.isidentifier():
            if expression not in namespace:
                raise UsageError(
                    f"%dtype_check: {what} {received(expression)} is not defined in this namespace"
                )
            return namespace[expression]
        try:
            return self.shell.ev(expression)
        except Exception as error:
            raise UsageError(
                f"%dtype_check: could not evaluate {what} {received(expression)}: "
                f"{type(error).__name__}: {received(str(error))}"
            ) from None


def _steps(text: str | None) -> Any:
    """``--steps`` as check_model takes it: a number written in digits as that int, anything
    else as written (refused there, saying what was received)."""
    if text is None:
        return 1
    return int(text) if text.strip().isdigit() else text


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%dtype_check`` and ``%%dtype_trace`` (run by ``%load_ext dtype_explorer``)."""
    ipython.register_magics(DtypeMagics)
