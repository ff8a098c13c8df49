"""One training step's report (``mode="fit"``): the loss, the optimizer, loss scaling and each
gradient's dtype.

>>> FitReport(loss="mse", optimizer="SGD", loss_value=0.125).text()
'SGD on mse, loss 0.125; no loss scaling'
"""

from __future__ import annotations

from pydantic import Field

from dtype_explorer.records._base import Record


class GradientInfo(Record):
    """One trainable variable's gradient in a training step, as the optimizer received it
    (scaled by the loss scale when ``LossScaleOptimizer`` is active)."""

    name: str
    dtype: str
    variable_dtype: str
    #: inf/NaN values in the gradient; ``None`` when the step could not report them.
    nonfinite: int | None = 0


class FitReport(Record):
    """One training step (``mode="fit"``): the loss and optimizer, whether loss scaling was
    active, each gradient's dtype, and the variables' dtypes after the step."""

    loss: str
    optimizer: str
    loss_value: float | None = None
    loss_scaling: bool = False
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

    @property
    def nonfinite_gradients(self) -> list[str]:
        """The variables whose gradient held inf or NaN."""
        return [g.name for g in self.gradients if g.nonfinite]

    def text(self) -> str:
        """``SGD on mean_squared_error, loss 0.12; loss scaling on (scale 32768)``."""
        value = f", loss {self.loss_value:.4g}" if self.loss_value is not None else ""
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
