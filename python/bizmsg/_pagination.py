"""Pages of a listing, and how a page fetches the ones after it.

A page fetched by a client remembers where it came from: a :class:`PageSource` (the client, the
listing, the page size and the call options). ``next_page()`` asks that source for the next
page, which remembers the same source, so paging by hand repeats the first call exactly. The
listings (``_resources/listings.py``) fetch every page through a source too; only this module
sets the link.

The service pages with ``pageNo``/``pageSize`` and answers with ``total``, ``size``,
``current`` and ``pages``; when another page follows is decided in Rust
(``_native.has_next_page``), by the same rule the page stream follows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, is_dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from . import _native
from ._model import Model, dumps, restore
from .errors import BizmsgError

if TYPE_CHECKING:
    from ._timeout import Timeout
    from .models import BusinessAccount, BusinessPhoneNumber

__all__ = ["BasePage", "Page", "AsyncPage", "PageSource", "items_of", "items_of_async", "to_pandas"]

# Named, not imported: the item models import this module (bizmsg.models exports the pages).
T = TypeVar("T", "BusinessAccount", "BusinessPhoneNumber")
PageT = TypeVar("PageT")


class PageSource:
    """Where the pages of one listing call come from: the client, the listing, the page size
    and the call options. Every page it returns (but a raw one) can fetch its next page."""

    __slots__ = ("_native", "_kind", "_page_size", "_timeout", "_max_retries")

    def __init__(self, native: _native.NativeClient, kind: _native.Listing, page_size: int,
                 timeout: Timeout | None, max_retries: int | None) -> None:
        self._native = native
        self._kind = kind
        self._page_size = page_size
        self._timeout = timeout
        self._max_retries = max_retries

    def page(self, page_no: int, raw: bool = False) -> Page[Any] | dict[str, Any]:
        """Page ``page_no`` (a ``dict`` with ``raw``), waiting with the GIL released."""
        page = self._native.list(kind=self._kind, page_no=page_no, page_size=self._page_size,
                                 raw=raw, timeout=self._timeout, max_retries=self._max_retries)
        return page if raw else self._link(cast("Page[Any]", page))

    async def page_async(self, page_no: int, raw: bool = False
                         ) -> AsyncPage[Any] | dict[str, Any]:
        """Awaitable :meth:`page`; its pages are ``AsyncPage``."""
        page = await self._native.list_async(
            kind=self._kind, page_no=page_no, page_size=self._page_size, raw=raw,
            timeout=self._timeout, max_retries=self._max_retries)
        return page if raw else self._link(cast("AsyncPage[Any]", page))

    def stream(self, page_no: int, limit: int | None) -> _native.PageStream:
        """The pages from ``page_no`` on, one read ahead in Rust, stopping once ``limit`` items
        were delivered. The arguments are checked now, not at the first page."""
        return self._native.pages(kind=self._kind, page_no=page_no, page_size=self._page_size,
                                  limit=limit, timeout=self._timeout,
                                  max_retries=self._max_retries)

    def pages(self, stream: _native.PageStream) -> Iterator[Page[Any]]:
        """The pages of ``stream``, each able to fetch its next page."""
        while (page := stream.next()) is not None:
            yield self._link(page)

    async def pages_async(self, stream: _native.PageStream) -> AsyncIterator[AsyncPage[Any]]:
        """``async for`` over the pages of ``stream``."""
        while (page := await stream.next_async()) is not None:
            yield self._link(page)

    def _link(self, page: PageT) -> PageT:
        object.__setattr__(page, "_source", self)
        return page


# The stream itself stops at `limit` (its last page is cut to it): these only flatten.
def items_of(stream: _native.PageStream) -> Iterator[Any]:
    """The items of every page of ``stream``."""
    while (page := stream.next()) is not None:
        yield from page.data


async def items_of_async(stream: _native.PageStream) -> AsyncIterator[Any]:
    """``async for`` over the items of every page of ``stream``."""
    while (page := await stream.next_async()) is not None:
        for item in page.data:
            yield item


class _Sourced(Model):
    """A model that may know the :class:`PageSource` it came from (set by that source)."""

    __slots__ = ("_source",)
    _source: PageSource


@dataclass(frozen=True, slots=True)
class BasePage(_Sourced, Generic[T]):
    """What :class:`Page` and :class:`AsyncPage` share: ``data`` and the envelope (``total``,
    ``size``, ``current``, ``pages``). ``total`` and ``pages`` are ``None`` when the service
    leaves them out; ``size`` and ``current`` then fall back to what was requested. Iterating a
    page iterates ``data``. The two differ only in how they fetch the next page."""

    data: list[T]
    total: int | None
    size: int
    current: int
    pages: int | None

    _WIRE_NAMES = (
        ("data", "data"),
        ("total", "total"),
        ("size", "size"),
        ("current", "current"),
        ("pages", "pages"),
    )
    _KIND = "Page"

    def __iter__(self) -> Iterator[T]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        # A sync and an async client's pages of the same data are equal: they differ only in
        # how they fetch the next page, which is not part of the page's value.
        if not isinstance(other, BasePage):
            return NotImplemented
        return self._value() == other._value()

    def _value(self) -> tuple[object, ...]:
        return (self.data, self.total, self.size, self.current, self.pages)

    def has_next_page(self) -> bool:
        """Whether another page may follow: ``current < pages``; without ``pages``,
        ``current * size < total``; without either, whether this page was full. An empty
        page is always the last."""
        return _native.has_next_page(current=self.current, size=self.size,
                                     items=len(self.data), pages=self.pages, total=self.total)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Decodes a page envelope. Its items are read as phone numbers when the first one
        has a ``phoneNumberId``, else as accounts."""
        items: object = data.get("data")
        first: object = items[0] if isinstance(items, list) and items else None  # pyright: ignore[reportUnknownVariableType]
        numbers = isinstance(first, Mapping) and "phoneNumberId" in first
        kind = "BusinessPhoneNumber" if numbers else "BusinessAccount"
        return _native.model_from_json(kind=cls._KIND, json=dumps(data), item_kind=kind)

    def __reduce__(self) -> tuple[Any, ...]:
        # The item kind travels (a page of accounts stays one whatever its items hold), and
        # `current` and `size` too: decoding falls back on them when the service left them
        # out, so an unpickled page equals the original.
        kind = type(self.data[0])._KIND if self.data else "BusinessPhoneNumber"
        return (restore, (type(self), self._wire_bytes(), None, (self.current, self.size),
                          kind))

    def _page_source(self) -> PageSource:
        source: PageSource | None = getattr(self, "_source", None)
        if source is None:
            raise BizmsgError(
                "this page was not fetched by a client (built by from_dict, unpickled or "
                "copied), so it cannot fetch the next one"
            )
        return source

    def _next_page_no(self) -> int | None:
        """The number of the page after this one, ``None`` after the last; checked before
        anything is fetched, so a page that is the last never needs its source."""
        return self.current + 1 if self.has_next_page() else None

    def to_records(self) -> list[dict[str, Any]]:
        """The items as plain dicts keyed by field name (nested phone numbers as dicts too);
        values as on the models (timestamps are ``datetime`` or ``None``)."""
        from ._dataframes import record

        return [record(item) for item in self.data]

    def to_pandas(self, *, explode: bool = False) -> Any:
        """The items as a ``pandas.DataFrame`` (``pip install 'bizmsg[pandas]'``).

        Columns are the snake_case field names; timestamps are ``datetime64[ns, UTC]``
        columns (``NaT`` for a missing or unparseable one). A page of accounts gives one row
        per account: ``business_phone_numbers`` holds the **count** of its numbers and
        ``phone_number_ids`` the list of their ids. ``explode=True`` gives one row per
        (account, number) instead, with the number's fields prefixed ``number_``
        (``number_phone_number_id``, ``number_status``, ...); an account without numbers
        keeps one row with those columns empty. For a page of numbers ``explode`` changes
        nothing. :func:`bizmsg.to_pandas` does the same for any iterable of models.
        """
        from ._dataframes import models_to_frame

        return models_to_frame(self.data, explode=explode, what="Page.to_pandas()")

    def _repr_html_(self) -> str:
        # The columns that matter, badges, UTC timestamps, the rest collapsed (_display.py).
        from ._display import page_html

        return page_html(self)


# Page and AsyncPage add no field: BasePage's dataclass methods (init, repr, eq, frozenness)
# serve them as they are, so they are not made dataclasses again (which costs import time for
# nothing).
class Page(BasePage[T]):
    """One page of a listing from a :class:`~bizmsg.Client`: ``data`` and the envelope
    (``total``, ``size``, ``current``, ``pages``). ``total`` and ``pages`` are ``None`` when
    the service leaves them out; ``size`` and ``current`` then fall back to what was
    requested. Iterating a page iterates ``data``; :meth:`next_page` fetches the next one."""

    __slots__ = ()

    def next_page(self) -> Page[T] | None:
        """Fetches the page after this one with the client, page size and options that
        fetched this one; ``None`` when this is the last page."""
        page_no = self._next_page_no()
        if page_no is None:
            return None
        return cast("Page[T]", self._page_source().page(page_no))

    async def next_page_async(self) -> AsyncPage[T] | None:
        """Awaitable :meth:`next_page`: the next page fetched without blocking the event loop,
        as an :class:`AsyncPage` (whose own ``next_page`` is awaitable)."""
        page_no = self._next_page_no()
        if page_no is None:
            return None
        return cast("AsyncPage[T]", await self._page_source().page_async(page_no))


class AsyncPage(BasePage[T]):
    """One page of a listing from an :class:`~bizmsg.AsyncClient`: the same as a
    :class:`Page`, but its :meth:`next_page` is awaitable (``await page.next_page()``), so
    paging never blocks the event loop. ``next_page_async`` is the same call."""

    __slots__ = ()

    async def next_page(self) -> AsyncPage[T] | None:
        """Fetches the page after this one with the client, page size and options that
        fetched this one; ``None`` when this is the last page."""
        page_no = self._next_page_no()
        if page_no is None:
            return None
        return cast("AsyncPage[T]", await self._page_source().page_async(page_no))

    async def next_page_async(self) -> AsyncPage[T] | None:
        """The same as :meth:`next_page`."""
        return await self.next_page()


def to_pandas(items: Iterable[Any], *, explode: bool = False) -> Any:
    """One ``pandas.DataFrame`` from any iterable of bizmsg models: a list, a :class:`Page`,
    ``client.business_phone_numbers.iter(page_size=1000)`` (consumed lazily, page by page) or
    ``iter_pages()`` (each page's items). Needs ``pip install 'bizmsg[pandas]'``.

    Columns are the snake_case field names. Timestamps are ``datetime64[ns, UTC]`` columns
    (``NaT`` where the service sent none or one that could not be parsed). Accounts give one
    row each, with ``business_phone_numbers`` holding the **number** of their phone numbers
    and ``phone_number_ids`` the list of their ids; with ``explode=True``, one row per
    (account, number) instead, the number's fields prefixed ``number_`` (an account without
    numbers keeps one row with those columns empty). ``explode`` changes nothing for items
    without nested numbers. An empty iterable gives an empty DataFrame.

    >>> frame = bizmsg.to_pandas(client.business_phone_numbers.iter(page_size=1000))
    >>> frame.groupby("quality_rating").size()
    """
    if isinstance(items, (str, bytes, Mapping)):
        raise TypeError("bizmsg.to_pandas() takes an iterable of bizmsg models")
    if is_dataclass(items) and not isinstance(items, type) and not hasattr(items, "__iter__"):
        items = [items]  # one model: one row (or its exploded rows)
    from ._dataframes import models_to_frame

    return models_to_frame(items, explode=explode, what="bizmsg.to_pandas()", pages=BasePage)
