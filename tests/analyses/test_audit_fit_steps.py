"""``check_model(model, x, mode="fit", steps=N)``: N real training steps on a copy, each
recorded (loss, loss scale, skipped, inf/NaN gradients). Ground truth: the same copy trained
N steps by raw Keras in the test (same weights, same batch, the same compile), on tensorflow
in this process and on jax in a fresh process."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from on_backend import json_on

import dtype_explorer as dx
from dtype_explorer.analyses import progress_with
from dtype_explorer.errors import InvalidSpecError


def mixed_net() -> keras.Model:
    """Dense layers under mixed_float16 (the model's own policy too: compile adds a
    LossScaleOptimizer), the head in float32; fixed weights."""
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((4,), name="x")
        hidden = keras.layers.Dense(8, name="hidden")(inputs)
        outputs = keras.layers.Dense(3, name="head", dtype="float32")(hidden)
        model = keras.Model(inputs, outputs, name="net")
    finally:
        keras.config.set_dtype_policy("float32")
    rng = np.random.default_rng(0)
    model.set_weights(
        [rng.uniform(-0.5, 0.5, w.shape).astype(w.dtype) for w in model.get_weights()]
    )
    model.compile(optimizer=keras.optimizers.SGD(1e-4), loss="mse")
    return model


def raw_steps(model: keras.Model, x, y, steps: int) -> list[dict]:
    """Raw Keras: a copy of ``model`` (its weights), compiled as it is, trained ``steps``
    steps of one batch; after each, the loss, the LossScaleOptimizer's scale and whether its
    inner optimizer's iterations advanced."""
    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    # what compile made of SGD for the model (its policy mixed_float16): loss scaling
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1e-4))
    copy.compile(optimizer=optimizer, loss="mse")
    found, before = [], int(optimizer.inner_optimizer.iterations.numpy())
    for _ in range(steps):
        history = copy.fit(x, y, batch_size=len(x), epochs=1, verbose=0, shuffle=False)
        now = int(optimizer.inner_optimizer.iterations.numpy())
        found.append(
            {
                "loss": history.history["loss"][0],
                "scale": float(optimizer.dynamic_scale.numpy()),
                "skipped": now == before,
            }
        )
        before = now
    return found


def test_steps_beside_raw_keras_the_scale_halves_at_each_skipped_step():
    model = mixed_net()
    x, y = np.full((2, 4), 30.0, "float32"), np.zeros((2, 3), "float32")  # overflows float16
    weights = [w.copy() for w in model.get_weights()]
    report = dx.check_model(model, x, mode="fit", steps=14)
    raw = raw_steps(model, x, y, 14)
    fit = report.fit
    assert [s.step for s in fit.steps] == list(range(1, 15))
    assert [s.loss_scale for s in fit.steps] == [r["scale"] for r in raw]
    assert [s.skipped for s in fit.steps] == [r["skipped"] for r in raw]
    np.testing.assert_allclose([s.loss for s in fit.steps], [r["loss"] for r in raw], rtol=1e-5)
    # it really overflows: each skipped step held inf/NaN and halved the scale; then it trains
    skipped = fit.skipped_steps
    assert skipped and skipped == tuple(range(1, len(skipped) + 1)) and len(skipped) < 14
    assert fit.loss_scale == 2.0**15
    assert [s.loss_scale for s in fit.steps[: len(skipped)]] == [
        2.0**15 / 2**k for k in range(1, len(skipped) + 1)
    ]
    assert all(s.nonfinite for s in fit.steps if s.skipped)
    assert not any(s.nonfinite for s in fit.steps if not s.skipped)
    assert fit.steps[-1].loss < fit.steps[0].loss  # trained once the scale fits
    # the first step and variable: raw Keras's own gradient of the scaled loss at step 1
    import tensorflow as tf  # this session's backend (conftest)

    copy = keras.models.clone_model(model)
    copy.set_weights(weights)
    with tf.GradientTape() as tape:
        loss = keras.ops.mean(keras.losses.mean_squared_error(y, copy(x)))
        scaled = loss * 2.0**15
    grads = tape.gradient(scaled, copy.trainable_variables)
    bad = {
        v.path.removeprefix("net/"): int(np.size(g) - np.isfinite(g.numpy()).sum())
        for v, g in zip(copy.trainable_variables, grads)
    }
    assert set(fit.steps[0].nonfinite) == {k for k, n in bad.items() if n}
    assert fit.first_nonfinite() == (1, "hidden/kernel")
    # the first step is today's one-step report; the model itself was not trained
    assert fit.loss_scale_after == fit.steps[0].loss_scale and fit.nonfinite_gradients
    assert all(a.tobytes() == b.tobytes() for a, b in zip(weights, model.get_weights()))
    assert "14 training steps" in report.execution
    text = str(report)
    assert (
        "14 steps: loss" in text
        and "skipped" in text
        and "first inf/NaN gradient at step 1" in text
    )
    assert "dx-fit-steps" in report._repr_html_()
    figure = report.figure()
    assert [t.name for t in figure.data][:2] == ["loss (mse)", "loss scale (after the step)"]
    assert list(figure.data[2].x) == list(skipped)


def test_one_step_is_todays_report_and_bad_steps_are_refused():
    model = mixed_net()
    one = dx.check_model(model, mode="fit").fit
    assert one.steps == () and "one training step" in one.execution
    with pytest.raises(InvalidSpecError, match="figure\\(\\) draws a training run of several"):
        one.figure()
    for bad in (0, -2, 1.5, True, "3", 10**6):
        with pytest.raises(InvalidSpecError, match=r"a whole number from 1 to 1000\. Received: "):
            dx.check_model(model, mode="fit", steps=bad)
    with pytest.raises(InvalidSpecError, match="pass it with mode='fit'; got mode='call'"):
        dx.check_model(model, steps=3)


def test_a_long_run_shows_its_progress():
    import contextlib

    seen = []

    @contextlib.contextmanager
    def bars(total, desc):
        updates = []
        seen.append((total, desc, updates))

        class Bar:
            def update(self, n):
                updates.append(n)

            def set_postfix_str(self, text, refresh=False):
                pass

        yield Bar()

    with progress_with(bars):
        dx.check_model(mixed_net(), mode="fit", steps=25)
        dx.check_model(mixed_net(), mode="fit", steps=3)  # a short run: no bar
    assert [(total, desc, sum(u)) for total, desc, u in seen] == [(25, "fit net", 25)]


def test_magic_steps(shell):
    from IPython.core.error import UsageError

    shell.user_ns["steps_net"] = mixed_net()
    try:
        report = shell.run_line_magic("dtype_check", "steps_net --mode fit --steps 3")
        assert [s.step for s in report.fit.steps] == [1, 2, 3]
        with pytest.raises(UsageError, match="Received: steps='three'"):
            shell.run_line_magic("dtype_check", "steps_net --mode fit --steps three")
    finally:
        shell.user_ns.pop("steps_net", None)


_JAX = """
import json
import keras, numpy as np
import dtype_explorer as dx
from dtype_explorer.analyses import progress_with

keras.config.set_dtype_policy("mixed_float16")
inputs = keras.Input((4,), name="x")
hidden = keras.layers.Dense(8, name="hidden")(inputs)
outputs = keras.layers.Dense(3, name="head", dtype="float32")(hidden)
model = keras.Model(inputs, outputs, name="net")
keras.config.set_dtype_policy("float32")
rng = np.random.default_rng(0)
model.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(w.dtype) for w in model.get_weights()])
model.compile(optimizer=keras.optimizers.SGD(1e-4), loss="mse")
x, y = np.full((2, 4), 30.0, "float32"), np.zeros((2, 3), "float32")
fit = dx.check_model(model, x, mode="fit", steps=10).fit
copy = keras.models.clone_model(model)
copy.set_weights(model.get_weights())
optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1e-4))
copy.compile(optimizer=optimizer, loss="mse")
raw, before = [], int(copy.optimizer.inner_optimizer.iterations)
for _ in range(10):
    loss = copy.fit(x, y, batch_size=2, epochs=1, verbose=0, shuffle=False).history["loss"][0]
    now = int(copy.optimizer.inner_optimizer.iterations)
    raw.append([float(copy.optimizer.dynamic_scale), now == before, loss])
    before = now
print(json.dumps({
    "tool": [[s.loss_scale, s.skipped, s.loss, bool(s.nonfinite), s.counted] for s in fit.steps],
    "raw": raw, "execution": fit.execution,
}))
"""


def test_steps_on_jax_beside_raw_keras():
    got = json_on("jax", _JAX)
    assert "10 training steps, compiled by jax.jit" in got["execution"]
    tool, raw = got["tool"], got["raw"]
    assert [t[:2] for t in tool] == [r[:2] for r in raw]
    np.testing.assert_allclose([t[2] for t in tool], [r[2] for r in raw], rtol=1e-5)
    assert any(t[1] for t in tool) and all(t[4] for t in tool)  # read inside jax.jit each step
    assert [t[1] for t in tool] == [t[3] for t in tool]  # skipped exactly where inf/NaN


def bfloat16_net(dtype: str = "bfloat16", head: str | None = None) -> keras.Model:
    """Two Dense layers whose variables are stored in ``dtype``, Adam at 1e-4: in bfloat16
    every update of this run rounds away (keras-hub#2629); fixed weights."""
    inputs = keras.Input((16,), name="x")
    hidden = keras.layers.Dense(16, activation="relu", name="hidden", dtype=dtype)(inputs)
    outputs = keras.layers.Dense(1, name="head", dtype=head or dtype)(hidden)
    model = keras.Model(inputs, outputs, name="net")
    rng = np.random.default_rng(1)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in model.weights])
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="mse")
    return model


def _moved(model: keras.Model, x, y, steps: int) -> list[bool]:
    """Raw Keras: whether each trainable variable changed over ``steps`` fit steps."""
    before = [keras.ops.convert_to_numpy(v).copy() for v in model.trainable_variables]
    model.fit(x, y, batch_size=len(x), epochs=steps, verbose=0, shuffle=False)
    after = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    return [not np.array_equal(a, b) for a, b in zip(after, before)]


def test_training_that_changes_no_weight_is_found_and_its_float32_fix_proven():
    # bfloat16 variables under Adam(1e-4): the loss is flat and no weight moves, with nothing
    # raised; the audit had given only info findings
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 16)).astype("float32")
    y = rng.normal(size=(32, 1)).astype("float32")
    report = dx.check_model(bfloat16_net(), x, mode="fit", labels=y, steps=3)
    [lost] = report.by_kind("update-lost")
    assert lost.severity == "error" and report.fit.applied == 3
    assert {f.name for f in report.fit.frozen} == {
        "hidden/kernel",
        "hidden/bias",
        "head/kernel",
        "head/bias",
    }
    assert _moved(bfloat16_net(), x, y, 3) == [False] * 4  # raw Keras: nothing moved
    # the fix shown was run: those layers in float32, and raw Keras agrees it trains
    assert lost.proof.proven and lost.proof.after.frozen_values == 0
    assert 'name="hidden", dtype="float32"' in lost.fix and 'name="head"' in lost.fix
    assert _moved(bfloat16_net("float32"), x, y, 3) == [True] * 4
    # only the head in bfloat16: a warning naming it, the rest trains
    partial = dx.check_model(bfloat16_net("float32", "bfloat16"), x, mode="fit", labels=y)
    [head] = partial.by_kind("update-lost")
    assert head.severity == "warning" and head.details["variables"] == ["head/kernel", "head/bias"]
    assert _moved(bfloat16_net("float32", "bfloat16"), x, y, 1) == [True, True, False, False]
    # float32 everywhere: every weight moves, no finding
    assert not dx.check_model(bfloat16_net("float32"), x, mode="fit", labels=y).by_kind(
        "update-lost"
    )


class OwnLoss(keras.Model):
    """A model whose own train_step computes its loss: compiled with an optimizer only."""

    def train_step(self, data):
        import tensorflow as tf  # this session's backend (conftest)

        x, y = data
        with tf.GradientTape() as tape:
            loss = keras.ops.mean(keras.ops.square(self(x, training=True) - y))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(grads, self.trainable_variables)
        return {"loss": loss}


def own_loss_net() -> keras.Model:
    inputs = keras.Input((4,))
    model = OwnLoss(inputs, keras.layers.Dense(1, name="d")(inputs), name="own")
    model.set_weights([np.full((4, 1), 0.5, "float32"), np.zeros((1,), "float32")])
    model.compile(optimizer=keras.optimizers.SGD(0.01))
    return model


def test_a_model_compiled_with_an_optimizer_only_trains_as_compiled():
    # its train_step computes the loss: the audit called it "not compiled" and reported a
    # mean_squared_error it had compiled the copy with itself
    x = np.ones((8, 4), "float32")
    y = np.full((8, 1), 3.0, "float32")
    report = dx.check_model(own_loss_net(), x, mode="fit", labels=y, steps=2)
    assert report.fit.loss == "the loss its own train_step computes"
    assert any("compiled from the model's compile config" in n for n in report.notes)
    assert not any("not compiled" in n for n in report.notes)
    raw = own_loss_net().fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    assert [s.loss for s in report.fit.steps] == pytest.approx(raw.history["loss"], rel=1e-6)


class _Unscaled(keras.Model):
    """A custom train_step (the keras.io tensorflow guide's) that takes the gradients of the
    loss itself, never of ``optimizer.scale_loss(loss)``."""

    scales = False

    def train_step(self, data):
        import tensorflow as tf

        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            target = self.optimizer.scale_loss(loss) if self.scales else loss
        grads = tape.gradient(target, self.trainable_variables)
        self.optimizer.apply(grads, self.trainable_variables)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
        return {m.name: m.result() for m in self.metrics}


class _Scaled(_Unscaled):
    scales = True


def _custom_net(cls: type) -> keras.Model:
    """``mixed_net``'s layers and weights in a model of class ``cls``, built under
    mixed_float16: compile wraps SGD in a LossScaleOptimizer."""
    plain = mixed_net()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = keras.Input((4,), name="x")
        hidden = keras.layers.Dense(8, name="hidden")(inputs)
        outputs = keras.layers.Dense(3, name="head", dtype="float32")(hidden)
        model = cls(inputs, outputs, name="net")
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    finally:
        keras.config.set_dtype_policy("float32")
    model.set_weights(plain.get_weights())
    return model


def test_a_train_step_that_never_scales_the_loss_is_found_as_raw_keras_trains_it():
    """keras#19479: under mixed_float16 compile() adds a LossScaleOptimizer, which divides
    every gradient by its scale; a train step that never calls scale_loss trains ~32768
    times too slowly. The fit report said "loss scaling on" and found nothing."""
    x = np.random.default_rng(0).random((8, 4)).astype("float32")
    y = np.random.default_rng(1).random((8, 3)).astype("float32")
    moved, reports = {}, {}
    for cls in (_Unscaled, _Scaled):
        reports[cls] = dx.check_model(_custom_net(cls), x, mode="fit", labels=y, steps=2)
        raw = _custom_net(cls)
        before = raw.get_layer("head").get_weights()[0]
        raw.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
        moved[cls] = float(np.abs(raw.get_layer("head").get_weights()[0] - before).max())
    assert moved[_Unscaled] * 1000 < moved[_Scaled]  # raw Keras: the unscaled step barely moves
    unscaled, scaled = reports[_Unscaled], reports[_Scaled]
    [finding] = unscaled.by_kind("loss-not-scaled")
    assert finding.severity == "warning" and "scale_loss(loss)" in finding.message
    assert "32768" in finding.message and finding.fix == ""
    assert "train_step" in finding.proof.not_tried
    assert unscaled.fit.loss_scaled is False and "loss scaling on" not in unscaled.fit.text()
    assert "scale_loss not called" in unscaled.fit.text()
    assert not scaled.by_kind("loss-not-scaled") and scaled.fit.loss_scaled is True
    assert "loss scaling on" in scaled.fit.text()
    # Keras's own train_step scales the loss
    own = dx.check_model(mixed_net(), x, mode="fit", labels=y).fit
    assert own.loss_scaled is True and not own.warnings


_TORCH_UNSCALED = """
import json
import keras, numpy as np, torch
import dtype_explorer as dx

class Custom(keras.Model):  # the keras.io guide "custom_train_step_in_torch"
    scales = False

    def train_step(self, data):
        x, y = data
        self.zero_grad()
        y_pred = self(x, training=True)
        loss = self.compute_loss(y=y, y_pred=y_pred)
        (self.optimizer.scale_loss(loss) if self.scales else loss).backward()
        weights = list(self.trainable_weights)
        with torch.no_grad():
            self.optimizer.apply([v.value.grad for v in weights], weights)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
        return {m.name: m.result() for m in self.metrics}

class Scaled(Custom):
    scales = True

def build(cls):
    keras.config.set_dtype_policy("mixed_float16")
    inputs = keras.Input(shape=(32,))
    hidden = keras.layers.Dense(16, kernel_initializer=keras.initializers.GlorotUniform(0))
    head = keras.layers.Dense(1, dtype="float32", name="head",
                              kernel_initializer=keras.initializers.GlorotUniform(1))
    model = cls(inputs, head(hidden(inputs)))
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    keras.config.set_dtype_policy("float32")
    return model

x = np.random.RandomState(0).rand(8, 32).astype("float32")
y = np.random.RandomState(1).rand(8, 1).astype("float32")
out = {}
for cls in (Custom, Scaled):
    report = dx.check_model(build(cls), x, mode="fit", labels=y, steps=3)
    raw = build(cls)
    w0 = keras.ops.convert_to_numpy(raw.get_layer("head").kernel).copy()
    raw.fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False)
    w1 = keras.ops.convert_to_numpy(raw.get_layer("head").kernel)
    out[cls.__name__] = {
        "kinds": [f.kind for f in report.findings], "text": report.fit.text(),
        "scaled": report.fit.loss_scaled, "moved": float(np.abs(w1 - w0).max()),
    }
print(json.dumps(out))
"""


def test_a_torch_train_step_that_never_scales_the_loss_is_found_as_raw_keras_trains_it():
    got = json_on("torch", _TORCH_UNSCALED)
    unscaled, scaled = got["Custom"], got["Scaled"]
    assert unscaled["moved"] * 1000 < scaled["moved"]  # raw Keras on torch
    assert "loss-not-scaled" in unscaled["kinds"] and unscaled["scaled"] is False
    assert "loss scaling on" not in unscaled["text"]
    assert "loss-not-scaled" not in scaled["kinds"] and scaled["scaled"] is True
    assert "loss scaling on" in scaled["text"]


def test_update_lost_needs_a_rate_and_is_proven_on_a_nested_model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype("float32")
    y = rng.normal(size=(16, 1)).astype("float32")

    def nested(dtype: str, optimizer) -> keras.Model:
        inner = keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(4, dtype=dtype, name="a")], name="inner"
        )
        inputs = keras.Input((4,))
        model = keras.Model(inputs, keras.layers.Dense(1, name="b")(inner(inputs)), name="outer")
        model.compile(optimizer=optimizer, loss="mse")
        return model

    # a warmup from a rate of 0 (and a rate of 0) changes nothing and loses no update
    warmup = keras.optimizers.schedules.CosineDecay(0.0, 1000, warmup_target=1e-3, warmup_steps=9)
    for optimizer in (keras.optimizers.Adam(warmup), keras.optimizers.SGD(0.0)):
        report = dx.check_model(nested("float32", optimizer), x, mode="fit", labels=y, steps=2)
        assert not report.by_kind("update-lost")
    # bfloat16 inside a nested model: its clone names the variables otherwise; the proof
    # matches them by position, and raw Keras agrees the float32 layer then trains
    report = dx.check_model(
        nested("bfloat16", keras.optimizers.Adam(1e-4)), x, mode="fit", labels=y
    )
    [lost] = report.by_kind("update-lost")
    assert lost.details["variables"] == ["a/kernel", "a/bias"] and lost.proof.proven
    assert (
        _moved(nested("bfloat16", keras.optimizers.Adam(1e-4)), x, y, 1) == [False] * 2 + [True] * 2
    )
    assert _moved(nested("float32", keras.optimizers.Adam(1e-4)), x, y, 1) == [True] * 4
