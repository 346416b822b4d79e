"""pandas DataFrames (and plain records) from bizmsg models, or any dataclasses.

Imported when a frame or a record is first asked for (``Page.to_pandas()``,
:func:`bizmsg.to_pandas`, ``BulkResult.to_pandas()``); pandas itself is imported when a frame
is built. It imports no other module of bizmsg: it reads models as dataclasses.

The rules, for every frame built here:

- One column per dataclass field, named by the field (the snake_case of the wire name), in
  field order.
- Fields annotated ``datetime`` (and columns whose values are datetimes) become
  ``datetime64[ns, UTC]`` columns: offsets are converted to UTC, ``None`` (a timestamp the
  service sent that could not be parsed, or none at all) is ``NaT``, as is an instant pandas
  cannot hold in nanoseconds (before 1677 or after 2262). Naive datetimes are taken as UTC.
- A field holding a list of models (an account's ``business_phone_numbers``) is flattened:
  the column of that name holds their **count**, and a column named after the nested items'
  own id (``phone_number_ids``) the **list of their ids**. With ``explode=True`` there is
  instead one row per nested item, its fields prefixed with the singular of the field's last
  word (``number_phone_number_id``, ``number_status``, ``number_create_time``, ...); an item
  with no nested items keeps one row, whose prefixed columns are empty (``None``/``NaT``).
- The frame is built column by column while the items are consumed: neither all the models
  nor a dict per row are held at once, so a lazy ``iter()`` over a large listing only keeps
  the current page and the column values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["record", "models_to_frame", "records_to_frame", "require_pandas"]

_INSTALL_HINT = "pip install 'bizmsg[pandas]'"


def require_pandas(what: str) -> Any:
    """The pandas module, or an ``ImportError`` that says how to install it."""
    import importlib

    try:
        return importlib.import_module("pandas")
    except ImportError as exc:
        raise ImportError(
            f"{what} needs pandas, an optional dependency of bizmsg: {_INSTALL_HINT}",
            name="pandas",
        ) from exc


def _is_instance(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def record(item: Any) -> dict[str, Any]:
    """A dataclass as a dict keyed by field name; nested dataclasses (in lists too) as dicts.
    Values are the objects themselves (datetimes stay datetimes), unlike ``asdict`` nothing is
    deep-copied."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(item):
        value = getattr(item, f.name)
        if type(value) is list:
            value = [record(v) if _is_instance(v) else v for v in value]  # pyright: ignore
        elif _is_instance(value):
            value = record(value)
        out[f.name] = value
    return out


# --- layouts: what the columns of one dataclass are ------------------------------------------


class _Nested:
    """A field holding a list of dataclasses of type ``cls``."""

    __slots__ = ("name", "cls", "ids_column", "id_field", "prefix")

    def __init__(self, name: str, cls: type, parent_fields: set[str]) -> None:
        self.name = name
        self.cls = cls
        # The nested item's own id: its first `*_id` field that the parent does not have
        # (a number's `phone_number_id`, not the `biz_account_id` it shares with its account).
        own = [f.name for f in dataclasses.fields(cls)
               if f.name.endswith("_id") and f.name not in parent_fields]
        self.id_field: str | None = own[0] if own else None
        self.ids_column: str | None = f"{own[0]}s" if own else None
        last = name.rsplit("_", 1)[-1]
        self.prefix = (last[:-1] if last.endswith("s") and len(last) > 1 else last) + "_"


class _Layout:
    """The columns of one dataclass type, worked out once from its fields and annotations."""

    __slots__ = ("names", "datetimes", "nested", "flat_names", "exploded")

    def __init__(self, cls: type) -> None:
        hints = _type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        self.names = tuple(names)
        self.datetimes = frozenset(n for n in names if _is_datetime(hints.get(n)))
        self.nested = {
            n: _Nested(n, item_cls, set(names))
            for n in names
            if (item_cls := _list_item_dataclass(hints.get(n))) is not None
        }
        flat: list[str] = []
        for n in names:
            flat.append(n)
            nested = self.nested.get(n)
            if nested is not None and nested.ids_column is not None:
                flat.append(nested.ids_column)
        #: Column names of a row without explode.
        self.flat_names = tuple(flat)
        #: With explode: the field exploded, and the column names of its rows.
        self.exploded: tuple[_Nested, tuple[str, ...]] | None = None
        if self.nested:
            target = next(iter(self.nested.values()))
            child = layout(target.cls)
            cols = [c for c in flat if c not in (target.name, target.ids_column)]
            cols += [target.prefix + c for c in child.flat_names]
            self.exploded = (target, tuple(cols))

    def datetime_columns(self, explode: bool) -> set[str]:
        out = set(self.datetimes)
        if explode and self.exploded is not None:
            target, _ = self.exploded
            out |= {target.prefix + c for c in layout(target.cls).datetimes}
        return out

    def flat_values(self, item: object) -> list[Any]:
        values: list[Any] = []
        for n in self.names:
            value = getattr(item, n)
            nested = self.nested.get(n)
            if nested is None:
                values.append(value)
                continue
            items: list[Any] = value if isinstance(value, list) else []  # pyright: ignore
            values.append(len(items))
            if nested.id_field is not None:
                values.append([getattr(v, nested.id_field, None) for v in items])
        return values

    def rows(self, item: object, explode: bool) -> Iterator[tuple[tuple[str, ...], list[Any]]]:
        """``(column names, values)`` for each row of ``item``."""
        if not explode or self.exploded is None:
            yield self.flat_names, self.flat_values(item)
            return
        target, cols = self.exploded
        child = layout(target.cls)
        base = [v for c, v in zip(self.flat_names, self.flat_values(item))
                if c not in (target.name, target.ids_column)]
        children = getattr(item, target.name)
        if not children:
            yield cols, base + [None] * len(child.flat_names)
            return
        for nested_item in children:
            yield cols, base + child.flat_values(nested_item)


_LAYOUTS: dict[type, _Layout] = {}


def layout(cls: type) -> _Layout:
    found = _LAYOUTS.get(cls)
    if found is None:
        found = _LAYOUTS[cls] = _Layout(cls)
    return found


def _type_hints(cls: type) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: fall back on the values
        return {}


def _is_datetime(hint: Any) -> bool:
    import typing

    if hint is None:
        return False
    if isinstance(hint, type):
        return issubclass(hint, datetime)
    return any(isinstance(a, type) and issubclass(a, datetime) for a in typing.get_args(hint))


def _list_item_dataclass(hint: Any) -> type | None:
    import typing

    if typing.get_origin(hint) is not list:
        return None
    args = typing.get_args(hint)
    if len(args) == 1 and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
        return args[0]
    return None


# --- column accumulation ---------------------------------------------------------------------


class _Columns:
    """Values gathered column by column; rows may bring new columns (earlier rows get None)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {}
        self.count = 0
        self._last: tuple[str, ...] | None = None
        self._lists: list[list[Any]] = []

    def add(self, names: tuple[str, ...], values: list[Any]) -> None:
        if names is not self._last:
            self._switch(names)
        for column, value in zip(self._lists, values):
            column.append(value)
        self.count += 1
        if len(self._lists) != len(self.columns):  # this row lacks some columns
            for column in self.columns.values():
                if len(column) < self.count:
                    column.append(None)

    def add_mapping(self, row: Mapping[str, Any]) -> None:
        self.add(tuple(row), list(row.values()))

    def _switch(self, names: tuple[str, ...]) -> None:
        for name in names:
            if name not in self.columns:
                self.columns[name] = [None] * self.count
        self._last = names
        self._lists = [self.columns[name] for name in names]


def _frame(pd: Any, columns: _Columns, datetime_columns: Iterable[str]) -> Any:
    wanted = set(datetime_columns)
    data: dict[str, Any] = {}
    for name, values in columns.columns.items():
        # Generic records: a column whose first value is a datetime is a timestamp column too.
        if name in wanted or isinstance(next((v for v in values if v is not None), None),
                                        datetime):
            data[name] = utc_column(pd, values)
        else:
            data[name] = values
    columns.columns = {}
    return pd.DataFrame(data, columns=list(data))


def utc_column(pd: Any, values: Any) -> Any:
    """A ``datetime64[ns, UTC]`` Series from datetimes, None or timestamp text (``NaT`` for
    what cannot be read or held in nanoseconds)."""
    if not isinstance(values, pd.Series):
        values = pd.Series(values, dtype=object)
    series = pd.to_datetime(values, utc=True, errors="coerce")
    if hasattr(series.dt, "as_unit"):  # pandas >= 2: the unit may be inferred as "us"
        if str(series.dt.unit) != "ns":
            low = pd.Timestamp.min.tz_localize("UTC")
            high = pd.Timestamp.max.tz_localize("UTC")
            series = series.where((series >= low) & (series <= high)).dt.as_unit("ns")
    return series


# --- public entry points ---------------------------------------------------------------------


def models_to_frame(items: Iterable[Any], *, explode: bool = False,
                    what: str = "to_pandas()", pages: type | None = None) -> Any:
    """One DataFrame from dataclass instances (bizmsg models or others), by the rules of this
    module. Items of the class ``pages`` (bizmsg's pages) contribute their ``data`` instead
    (so an ``iter_pages()`` works too)."""
    pd = require_pandas(what)  # before consuming anything: a listing is not fetched in vain
    if hasattr(items, "__aiter__") and not hasattr(items, "__iter__"):
        raise TypeError(
            f"{what} takes a plain iterable; collect an async one first: "
            "[item async for item in client.business_phone_numbers.iter()]"
        )
    columns = _Columns()
    datetime_columns: set[str] = set()
    seen: set[type] = set()
    for item in _flatten(items, what, pages):
        cls = type(item)
        lay = layout(cls)
        if cls not in seen:
            seen.add(cls)
            datetime_columns |= lay.datetime_columns(explode)
        for names, values in lay.rows(item, explode):
            columns.add(names, values)
    return _frame(pd, columns, datetime_columns)


def records_to_frame(records: Iterable[Mapping[str, Any]], *,
                     datetime_columns: Iterable[str] = (),
                     columns: Sequence[str] | None = None,
                     what: str = "to_pandas()") -> Any:
    """One DataFrame from mappings (e.g. :func:`record` of each outcome): the named
    ``datetime_columns``, and any whose values are datetimes, become ``datetime64[ns, UTC]``.
    ``columns`` fixes the columns and their order (present even with no records; keys not
    listed are dropped); otherwise they are the keys in the order first seen."""
    pd = require_pandas(what)
    gathered = _Columns()
    if columns is not None:
        gathered.add(tuple(columns), [None] * len(columns))
        gathered.count = 0
        for values in gathered.columns.values():
            values.clear()
    for row in records:
        gathered.add_mapping(row)
    if columns is not None:
        gathered.columns = {name: gathered.columns[name] for name in columns}
    return _frame(pd, gathered, datetime_columns)


def _flatten(items: Iterable[Any], what: str, pages: type | None) -> Iterator[object]:
    for item in items:
        if pages is not None and isinstance(item, pages):
            yield from getattr(item, "data")
        elif _is_instance(item):
            yield item
        else:
            raise TypeError(
                f"{what} takes bizmsg models (or other dataclass instances), "
                f"got {type(item).__name__}"
            )
