"""The atlas as a columnar file: one Parquet row per run (target, input dtype, policy, run:
``backend`` or ``backend/mode``), the atlas's header (axes, versions, devices, build) as JSON
in the file's metadata. DuckDB and pandas read it as it is (``SELECT * FROM 'atlas.parquet'``);
``atlas.json`` stays the export.

Rows are plain dicts (:data:`COLUMNS`); ``Atlas.to_rows``/``Atlas.from_rows`` make them, so
this module knows the layout and pyarrow, and nothing of the records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dtype_explorer.errors import InvalidSpecError

#: The key of the header in the Parquet file's metadata.
HEADER_KEY = b"dtype_explorer.atlas"
#: Rows written per row group (a reader of one target reads few groups).
ROW_GROUP = 20_000
#: Column -> its kind: text (nullable), int, a list of text, or JSON text (the cast path).
COLUMNS: dict[str, str] = {
    "target": "text",
    "input_dtype": "text",
    "policy": "text",
    "compute_dtype": "text",
    "cell_classification": "text",
    "run": "text",
    "status": "text",
    "outcome": "text",
    "classification": "text",
    "output_dtype": "text",
    "output_dtypes": "list",
    "documented_dtype": "text",
    "declared_dtype": "text",
    "verdict": "text",
    "cast_path": "json",
    "path_text": "text",
    "error_type": "text",
    "error_where": "text",
    "error_message": "text",
    "device": "text",
    "trace_ops": "int",
    "first_change": "text",
    "first_change_note": "text",
    "first_change_at": "text",
    "first_nonfinite": "text",
    "trace_flags": "list",
}

_JSON_COLUMNS = frozenset(name for name, kind in COLUMNS.items() if kind == "json")


def _schema(header: dict[str, Any]) -> Any:
    import pyarrow as pa

    kinds = {"text": pa.string(), "json": pa.string(), "int": pa.int32()}
    fields = [pa.field(n, kinds.get(k) or pa.list_(pa.string())) for n, k in COLUMNS.items()]
    return pa.schema(fields, metadata={HEADER_KEY: json.dumps(header, sort_keys=True)})


def write(path: Path, header: dict[str, Any], rows: Iterable[dict[str, Any]]) -> Path:
    """Write ``rows`` to the Parquet file ``path``, :data:`ROW_GROUP` at a time (the rows are
    read from the iterable as they are written, never all held)."""
    with AtlasStoreWriter(path, header) as writer:
        writer.add(rows)
    return path


class AtlasStoreWriter:
    """A Parquet atlas file written as its rows come (:meth:`add`, any number of times), a
    row group of :data:`ROW_GROUP` at a time; the header is known first."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        self._schema = _schema(header)
        self._writer = pq.ParquetWriter(path, self._schema, compression="zstd")
        self._batch: list[dict[str, Any]] = []

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self._batch.append(row)
            if len(self._batch) >= ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._batch:
            encoded = [
                {k: json.dumps(v) if COLUMNS[k] == "json" else v for k, v in r.items()}
                for r in self._batch
            ]
            self._writer.write_table(pa.Table.from_pylist(encoded, schema=self._schema))
            self._batch = []

    def __enter__(self) -> AtlasStoreWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self._flush()
        self._writer.close()


def read(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The header and the rows (read a row group at a time) of the atlas file ``path``."""
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InvalidSpecError(f"{str(path)!r} is not a Parquet file: {exc}") from None
    header = (file.schema_arrow.metadata or {}).get(HEADER_KEY)
    if header is None:
        raise InvalidSpecError(
            f"{str(path)!r} is not an atlas (no {HEADER_KEY.decode()!r} metadata); give the "
            "atlas.parquet that `dtype-explorer atlas build` wrote"
        )
    return json.loads(header), _rows(file)


def cells(path: Path) -> int:
    """How many cells (target, input dtype, policy) the atlas file ``path`` holds, from those
    three columns only."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["target", "input_dtype", "policy"])
    return len(set(zip(*(table.column(c).to_pylist() for c in table.column_names))))


def _rows(file: Any) -> Iterator[dict[str, Any]]:
    # A JSON column's text is decoded once per distinct text: the whole map's 96,012 cast
    # paths are 10,086 texts (2.4 of the 11 s it took to read back). Rows share the decoded
    # value, which the records validate into objects of their own.
    decoded: dict[str, Any] = {}
    for group in range(file.num_row_groups):
        for row in file.read_row_group(group).to_pylist():
            for name in _JSON_COLUMNS.intersection(row):
                text = row[name]
                if text not in decoded:
                    decoded[text] = json.loads(text)
                row[name] = decoded[text]
            yield row
