"""The base of every record: immutable, strict, JSON in and JSON out, displayed by its views."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

from dtype_explorer.errors import printable
from dtype_explorer.records import display as _display


class Record(BaseModel):
    """Base of every record: immutable, strict about unknown fields, JSON round-trips.

    Derived facts declared as ``computed_field`` travel in the JSON (so the widget's page reads
    them instead of recomputing them) and are dropped again when a record is read back.
    ``str(record)`` and ``record._repr_html_()`` are the record's text and HTML views.

    Each model's validator is built at its first use (``defer_build``), not at import: a
    process that reads one answer (the CLI's cached ``probe``) builds that answer's models
    only, not the ~50 the package declares. The schema, the JSON and the errors are the same.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__pydantic_computed_fields__ and not issubclass(cls, ComputedRecord):
            raise TypeError(
                f"{cls.__name__} declares computed fields "
                f"({', '.join(cls.__pydantic_computed_fields__)}): make it a ComputedRecord, "
                "which drops them when the record is read back"
            )

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        return cls.model_validate(data)

    def to_json(self, **kwargs: Any) -> str:
        """Compact JSON (fields at their defaults left out; ``from_json`` restores them)."""
        return self.model_dump_json(exclude_defaults=True, **kwargs)

    @classmethod
    def from_json(cls, text: str | bytes):
        return cls.model_validate_json(text)

    def __str__(self) -> str:
        return printable(_display.text(self))  # no control sequence reaches a terminal

    def _repr_html_(self) -> str | None:
        return _display.html(self)


class ComputedRecord(Record):
    """A record with derived facts (``computed_field``): they travel in its JSON and are
    dropped when it is read back (recomputed). Only these records carry the check: a Python
    validator on every record would be called for each of the thousands an answer nests (and,
    reading JSON, make pydantic build a dict for each)."""

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        """A record read back: its computed facts are recomputed, not taken from the input."""
        computed = cls.__pydantic_computed_fields__
        if isinstance(data, dict) and not computed.keys().isdisjoint(data):
            return {k: v for k, v in data.items() if k not in computed}
        return data


class GroupedRecord(Record):
    """A record of many results grouped into cells (a survey's, a promotion table's), the cells
    built once and again only when ``results`` is another tuple (``model_copy(update=...)``)."""

    _memo: tuple[Any, Any] | None = PrivateAttr(default=None)

    @property
    def _cells(self) -> dict:
        results = self.results  # type: ignore[attr-defined]
        if self._memo is None or self._memo[0] is not results:
            self._memo = (results, self._build_cells())
        return self._memo[1]

    def _build_cells(self) -> dict:
        raise NotImplementedError
