"""A training run's report (``mode="fit"``): the loss, the optimizer, loss scaling and each
gradient's dtype in the first step; with ``steps=N`` (``check_model(..., mode="fit",
steps=N)``), every step's loss, loss scale, whether it was skipped and its inf/NaN gradients
(:class:`FitStep`), and where inf/NaN first appear (:meth:`FitReport.first_nonfinite`).

>>> FitReport(loss="mse", optimizer="SGD", loss_value=0.125).text()
'SGD on mse, loss 0.125; no loss scaling'
>>> run = FitReport(loss="mse", optimizer="LossScaleOptimizer(SGD)", loss_scaling=True,
...     loss_scale=32768.0, steps=(FitStep(step=1, loss=0.5, loss_scale=16384.0, skipped=True,
...     nonfinite={"dense/kernel": 12}), FitStep(step=2, loss=0.5, loss_scale=16384.0)))
>>> run.first_nonfinite(), run.skipped_steps
((1, 'dense/kernel'), (1,))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from dtype_explorer.errors import InvalidSpecError
from dtype_explorer.records import display as _display
from dtype_explorer.records._base import Record

if TYPE_CHECKING:
    import plotly.graph_objects as go


class GradientInfo(Record):
    """One trainable variable's gradient in a training step, as the optimizer received it
    (scaled by the loss scale when ``LossScaleOptimizer`` is active)."""

    name: str
    dtype: str
    variable_dtype: str
    #: inf/NaN values in the gradient; ``None`` when the step could not report them.
    nonfinite: int | None = 0


class FrozenVariable(Record):
    """A trainable variable none of whose values a training run changed, though its gradients
    held nonzero values in the steps the optimizer applied (:attr:`FitReport.frozen`): each
    update was lost when stored. ``spacing`` is the gap between neighbouring values of its
    dtype at its median magnitude, what one update must reach (about half of it) to move a
    value there; ``None`` where it was not read."""

    name: str
    dtype: str
    size: int
    #: Nonzero gradient values, summed over the steps the optimizer applied.
    gradient_nonzero: int
    spacing: float | None = None
    #: The median magnitude of its values, where ``spacing`` was read.
    magnitude: float | None = None


#: The most training steps ``check_model(..., mode="fit", steps=N)`` runs: an audit, not a
#: training run (each step is a real ``model.fit`` step of a copy on one batch).
MAX_FIT_STEPS = 1000


class FitStep(Record):
    """One step of a training run on a copy (``check_model(..., mode="fit", steps=N)``), as
    Keras left it: the loss, the loss scale after the step (``LossScaleOptimizer``'s
    ``dynamic_scale``; ``None`` without loss scaling), whether the optimizer applied nothing
    (its ``iterations`` did not advance: ``LossScaleOptimizer`` skips a step whose gradients
    are not finite), and each gradient's inf/NaN count, for the variables that had any."""

    step: int
    #: ``None`` when Keras reported none, or a loss that is not finite (:attr:`loss_nonfinite`).
    loss: float | None = None
    loss_nonfinite: bool = False
    loss_scale: float | None = None
    skipped: bool = False
    #: variable -> inf/NaN values in its gradient, as the optimizer received it (scaled).
    nonfinite: dict[str, int] = Field(default_factory=dict)
    #: Whether the gradients' inf/NaN counts could be read in this step.
    counted: bool = True

    @property
    def loss_text(self) -> str:
        """The loss as a table shows it: ``0.1234``, ``inf/NaN`` or ``-``."""
        if self.loss_nonfinite:
            return "inf/NaN"
        return "-" if self.loss is None else f"{self.loss:.4g}"

    @property
    def nonfinite_total(self) -> int:
        return sum(self.nonfinite.values())


class FitReport(Record):
    """A training run on a copy (``mode="fit"``): the loss and optimizer, whether loss scaling
    was active, each gradient's dtype, its inf/NaN count and the loss scale in the first step,
    and the variables' dtypes after the run; with several steps, each step (:attr:`steps`)."""

    loss: str
    optimizer: str
    loss_value: float | None = None
    loss_scaling: bool = False
    #: Whether the train step scaled the loss (called the ``LossScaleOptimizer``'s
    #: ``scale_loss``): ``False``, it divided gradients that were never scaled; ``None``: no
    #: loss scaling, or not watched.
    loss_scaled: bool | None = None
    loss_scale: float | None = None
    loss_scale_after: float | None = None
    gradients: tuple[GradientInfo, ...] = ()
    variables_after: dict[str, str] = Field(default_factory=dict)
    #: What Keras warned during the step ("The model does not have any trainable weights.").
    warnings: tuple[str, ...] = ()
    #: Whether the step ran as ``model.fit`` compiles it (``jax.jit``, ``tf.function``);
    #: ``execution`` says how, in words.
    compiled: bool | None = None
    execution: str = ""
    #: Every step of a run of several (``steps=N``, N > 1), in order; empty for one step (the
    #: fields above are that step's).
    steps: tuple[FitStep, ...] = ()
    #: How many steps the optimizer applied (its ``iterations`` advanced; ``None``: not read).
    applied: int | None = None
    #: The trainable variables the run left exactly as they were, though gradients reached
    #: them in applied steps (each update rounded away when stored): in the model's order.
    frozen: tuple[FrozenVariable, ...] = ()

    @property
    def skipped_steps(self) -> tuple[int, ...]:
        """The steps the optimizer skipped (applied nothing), by number."""
        return tuple(s.step for s in self.steps if s.skipped)

    def first_nonfinite(self) -> tuple[int, str] | None:
        """The first step whose gradients held inf/NaN, and its first such variable (in the
        model's order of trainable variables); ``None`` when every step was finite."""
        for step in self.steps:
            if step.nonfinite:
                return step.step, next(iter(step.nonfinite))
        return None

    def scale_changes(self) -> list[tuple[int, float, float]]:
        """Each step that changed the loss scale: ``(step, before, after)``."""
        found, before = [], self.loss_scale
        for step in self.steps:
            if step.loss_scale is not None and before is not None and step.loss_scale != before:
                found.append((step.step, before, step.loss_scale))
            before = step.loss_scale if step.loss_scale is not None else before
        return found

    def steps_summary(self) -> str:
        """The run in a sentence: ``20 steps: loss 0.52 -> 0.031; 2 skipped (1, 2); loss scale
        32768 -> 8192; first inf/NaN gradient at step 1 (dense/kernel)`` (``""`` for one step)."""
        if not self.steps:
            return ""
        first, last = self.steps[0], self.steps[-1]
        said = [f"{len(self.steps)} steps: loss {first.loss_text} -> {last.loss_text}"]
        skipped = self.skipped_steps
        if skipped:
            shown = ", ".join(str(s) for s in skipped[:8]) + (", ..." if len(skipped) > 8 else "")
            said.append(f"{len(skipped)} skipped ({shown})")
        if self.loss_scaling and self.loss_scale is not None and last.loss_scale is not None:
            said.append(f"loss scale {self.loss_scale:g} -> {last.loss_scale:g}")
        where = self.first_nonfinite()
        said.append(
            f"first inf/NaN gradient at step {where[0]} ({where[1]})"
            if where is not None
            else "no inf/NaN gradient"
        )
        return "; ".join(said)

    def figure(self) -> go.Figure:
        """The loss and the loss scale over the steps, skipped steps marked (plotly); only a
        run of several steps has one (``check_model(..., mode="fit", steps=N)``)."""
        if not self.steps:
            raise InvalidSpecError(
                "figure() draws a training run of several steps: check_model(model, x, "
                "mode='fit', steps=N) with N > 1. Received: a report of one step"
            )
        return _display.figure(self)

    def steps_table(self) -> list[dict[str, str]]:
        """One row per step, as tables show them (keys: ``step``, ``loss``, ``loss scale``,
        ``skipped``, ``inf/NaN``: the gradients' count and where)."""
        rows = []
        for s in self.steps:
            if not s.counted:
                bad = "not read"
            elif s.nonfinite:
                names = list(s.nonfinite)
                bad = f"{s.nonfinite_total} in {names[0]}" + (
                    f" (+{len(names) - 1} more)" if len(names) > 1 else ""
                )
            else:
                bad = "0"
            rows.append(
                {
                    "step": str(s.step),
                    "loss": s.loss_text,
                    "loss scale": "-" if s.loss_scale is None else f"{s.loss_scale:g}",
                    "skipped": "skipped" if s.skipped else "",
                    "inf/NaN": bad,
                }
            )
        return rows

    @property
    def nonfinite_gradients(self) -> list[str]:
        """The variables whose gradient held inf or NaN."""
        return [g.name for g in self.gradients if g.nonfinite]

    def text(self) -> str:
        """``SGD on mean_squared_error, loss 0.12; loss scaling on (scale 32768)``; a
        LossScaleOptimizer whose loss the train step never scaled says so."""
        value = f", loss {self.loss_value:.4g}" if self.loss_value is not None else ""
        if self.loss_scaling and self.loss_scaled is False:
            by = f" by {self.loss_scale:g}" if self.loss_scale is not None else ""
            said = "the loss never scaled (scale_loss not called), its gradients divided" + by
            return f"{self.optimizer} on {self.loss}{value}; {said}"
        scaling = (
            f"loss scaling on (scale {self.loss_scale:g} -> {self.loss_scale_after:g})"
            if self.loss_scaling
            and self.loss_scale is not None
            and self.loss_scale_after is not None
            else "loss scaling on"
            if self.loss_scaling
            else "no loss scaling"
        )
        return f"{self.optimizer} on {self.loss}{value}; {scaling}"
