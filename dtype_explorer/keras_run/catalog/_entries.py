"""What a catalog entry holds: how to build and call one target, and its dtype contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from dtype_explorer.keras_run.catalog._op_calls import probed, tensors

Role = Literal["float", "index", "string", "any"]
#: ``compute``: float math in the compute dtype, result_type(input after autocast, compute dtype).
#: ``passthrough``: returns its input's dtype after autocast (reshaping, dropout, ...).
#: ``layer-dtype``: returns the layer's own compute dtype whatever the input (Embedding, Hashing).
#: ``self-managed``: casts inside ``call`` by its own rules (normalisation layers, ...), output in
#: the compute dtype.
#: ``own-output``: returns a dtype of its own choosing (indices, token ids) that no policy rule
#: decides; the declared spec is the only statement Keras makes about it.
Contract = Literal["compute", "passthrough", "layer-dtype", "self-managed", "own-output"]
#: How inputs are handed to ``__call__``: one tensor, a list of tensors, or positionally.
InputStyle = Literal["single", "list", "positional"]
#: ``promote``: result_type of the inputs; ``promote-float``: result_type(inputs, float);
#: ``bool``: a boolean result; ``index``: an int32 index; ``dtype-arg``: the explicit ``dtype=``
#: argument; ``none``: Keras documents no rule.
OpRule = Literal["promote", "promote-float", "bool", "index", "dtype-arg", "none"]

#: The ``(category, subcategory)`` of the ops with no dtype rule (``none``) whose result is
#: still arithmetic on their inputs' values (a normalization, a loss, a reduction, a product,
#: a filter): their numbers are checked against a wider run like any promoting op's.
#: Left out: ops that only move or select values (shape, indexing, creation), take callables,
#: reinterpret bits (``view``), produce indices, draw random numbers, or whose result is unique
#: only up to signs and order (``qr``, ``svd``, ``eig``, ``eigh``, ``lu_factor``); and the
#: image transforms (``resize``, ``rgb_to_grayscale``, ...), which keep an integer image's
#: dtype and round to it by design.
COMPUTING_GROUPS = frozenset(
    {
        ("nn", "normalization"),
        ("nn", "loss"),
        ("nn", "metric"),
        ("nn", "activation (along axis)"),
        ("nn", "activation (halves the axis)"),
        ("nn", "conv/pool"),
        ("nn", "attention"),
        ("reduction", "reduction"),
        ("linalg", "product"),
        ("linalg", "pairwise distance"),
        ("linalg", "statistics"),
        ("linalg", "determinant"),
        ("linalg", "diagonal sum"),
        ("math", "segment reduction"),
        ("math", "1-D correlation"),
        ("elementwise_unary", "element-wise"),
        ("nary", "einsum"),
    }
)
#: The decompositions and solves whose result is unique, and the image statistics (checked too).
COMPUTING_OPS = frozenset(
    {
        "ops.cholesky",
        "ops.cholesky_inverse",
        "ops.det",
        "ops.inv",
        "ops.solve",
        "ops.solve_triangular",
        "ops.pinv",
        "ops.lstsq",
        "ops.image.ssim",
    }
)


#: The layer groups whose layers compute on their inputs' values whatever their dtype
#: contract (a passthrough layer returns its input's dtype, computed in it).
COMPUTING_LAYER_GROUPS = frozenset(
    {"merging", "activation", "attention", "normalization", "pooling"}
)


@dataclass(frozen=True)
class LayerEntry:
    """One public ``keras.layers`` class and how to probe it."""

    name: str
    group: str
    contract: Contract
    shapes: tuple[tuple[int, ...], ...] = ((2, 4),)
    roles: tuple[Role, ...] = ("float",)
    kwargs: dict[str, Any] = field(default_factory=dict)
    input_style: InputStyle = "single"
    aliases: tuple[str, ...] = ()
    skip: str | None = None
    note: str = ""
    #: Each input's batch axis (``()``: axis 0 of every input); an RNN cell's states hold
    #: the batch at axis -2 (``(batch, units)``, LSTMCell's ``(2, batch, units)``).
    batch_axes: tuple[int, ...] = ()
    #: A layer outside the computing contracts and groups that still does arithmetic on its
    #: inputs' values (Rescaling: ``inputs * scale + offset``, in the layer's dtype).
    arithmetic: bool = False

    kind = "layer"

    @property
    def arity(self) -> int:
        return len(self.shapes)

    @property
    def computes_on_values(self) -> bool:
        """Whether the layer does arithmetic on its inputs' values, so an integer or bool
        input can come out as wrong numbers in a right dtype: a compute or self-managed
        layer, or a passthrough one of :data:`COMPUTING_LAYER_GROUPS` (RMSNormalization
        returns int32 input normalized and truncated), or one marked ``arithmetic``
        (Rescaling under a uint8 policy casts its scale 1/255 to 0). Reshaping,
        regularization at inference and the core passthroughs only move values."""
        computes = self.contract in ("compute", "self-managed") or self.arithmetic
        return computes or self.group in COMPUTING_LAYER_GROUPS

    def completed_shapes(self, given: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
        """``given`` shapes, completed to every input a positional call needs: a cell's
        ``(inputs, states)`` and an attention layer's ``(query, value)`` are all required
        arguments, so where fewer shapes are given the rest are the catalog's, each with the
        first given shape's batch at its batch axis. Other entries: ``given`` as it is.

        Args:
            given: the shapes the user gave, batch first.

        Returns:
            One shape per input the call needs.

        >>> cell = LayerEntry("LSTMCell", "rnn-cells", "compute", ((2, 3), (2, 2, 4)),
        ...     input_style="positional", batch_axes=(0, -2))
        >>> cell.completed_shapes(((8, 3),))
        ((8, 3), (2, 8, 4))
        """
        if self.input_style != "positional" or not given or len(given) >= self.arity:
            return given
        batch = given[0][0]
        missing = []
        for i in range(len(given), self.arity):
            shape = list(self.shapes[i])
            axis = self.batch_axes[i] if i < len(self.batch_axes) else 0
            shape[axis] = batch
            missing.append(tuple(shape))
        return (*given, *missing)

    def input_roles(self, arity: int) -> tuple[Role, ...]:
        """The role of each of ``arity`` inputs (the last role repeats)."""
        roles = self.roles or ("float",)
        return tuple(roles[min(i, len(roles) - 1)] for i in range(arity))


@dataclass(frozen=True)
class OpEntry:
    """One ``keras.ops`` function, probed as ``"ops.<name>"`` (``"ops.image.<name>"``).

    ``inputs`` are its positional arguments by role (see ``_op_calls``); ``shapes`` describe
    the *probed* inputs among them (the tensors a spec's ``input_dtypes`` give a dtype; each
    takes ``"any"`` dtype, their roles are in ``probed_roles``), so ``arity`` is how many
    dtypes a spec names. ``probe`` says what the probed
    dtype feeds: ``inputs``, the ``dtype=`` argument (``dtype_kwarg``: creation ops), or
    ``none`` (window functions take a Python length only).
    """

    name: str
    rule: OpRule
    shapes: tuple[tuple[int, ...], ...] = ((2, 3), (2, 3))
    kwargs: dict[str, Any] = field(default_factory=dict)
    group: str = "ops"
    roles: tuple[str, ...] = ()
    note: str = ""
    input_style: InputStyle = "positional"
    inputs: tuple[dict[str, Any], ...] = ()
    category: str = ""
    subcategory: str = ""
    probe: Literal["inputs", "dtype_kwarg", "none"] = "inputs"
    aliases: tuple[str, ...] = ()
    skip: str | None = None
    primary_dtype: str = "float32"
    rule_basis: str = ""
    references: dict[str, str | None] = field(default_factory=dict)
    backend_limits: dict[str, str] = field(default_factory=dict)

    kind = "op"

    @property
    def arity(self) -> int:
        return len(self.shapes)

    @property
    def tensor_count(self) -> int:
        """How many arrays the op's call takes, probed and fixed (``ops.take``: 2, its
        ``indices`` among them): ``values`` may carry every one, as a user passes them."""
        return len(tensors(self.inputs))

    @property
    def computes_on_values(self) -> bool:
        """Whether the op's result is arithmetic on its inputs' values, whatever its dtype
        rule: a promoting op, or one of :data:`COMPUTING_GROUPS` and :data:`COMPUTING_OPS`
        (``ops.rms_normalization`` states no dtype rule, yet truncates int32 input)."""
        if self.rule in ("promote", "promote-float"):
            return True
        if self.rule != "none":
            return False  # a bool, an index or a dtype= result
        return (self.category, self.subcategory) in COMPUTING_GROUPS or (self.name in COMPUTING_OPS)

    @property
    def function_name(self) -> str:
        """The name after ``ops.``: ``"add"``, ``"image.resize"``."""
        return self.name.removeprefix("ops.")

    @property
    def probed_roles(self) -> tuple[str, ...]:
        """The role of each probed input: ``data``, ``condition``, ``matrix``, ``image``, ..."""
        return tuple(spec["role"] for spec in probed(self.inputs))

    @property
    def short_name(self) -> str:
        """The function's own name: ``"resize"`` for ``ops.image.resize``."""
        return self.name.rsplit(".", 1)[-1]


ObjectiveKind = Literal["loss", "loss-function", "metric", "metric-function"]


@dataclass(frozen=True)
class ObjectiveEntry:
    """One public ``keras.losses`` or ``keras.metrics`` name (``"losses.MeanSquaredError"``,
    ``"losses.mean_squared_error"``, ``"metrics.Sum"``).

    ``inputs`` are ``y_true`` and ``y_pred`` (or a metric's ``values``), each with its role,
    shape, value preset and default dtype; a spec's input dtypes are theirs, in that order.
    ``init_kwargs`` are the constructor's required arguments (a ``"keras.<path>"`` string is
    that Keras object), ``kwargs`` a function's.
    """

    name: str
    kind: ObjectiveKind
    group: str
    inputs: tuple[dict[str, Any], ...] = ()
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    skip: str | None = None
    note: str = ""

    #: ``y_true`` and ``y_pred`` (or ``values``) are passed positionally.
    input_style: InputStyle = "positional"

    @property
    def arity(self) -> int:
        return len(self.inputs)

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(spec["shape"]) for spec in self.inputs)

    @property
    def roles(self) -> tuple[str, ...]:
        return ("any",) * self.arity

    @property
    def default_dtypes(self) -> tuple[str, ...]:
        return tuple(spec["dtype"] for spec in self.inputs)

    @property
    def short_name(self) -> str:
        return self.name.split(".", 1)[1]


Entry = LayerEntry | OpEntry | ObjectiveEntry
