"""``client.business_accounts`` and ``client.business_phone_numbers``: the two listings.

Both have one surface, ``list()`` (one page), ``iter()`` (every item) and ``iter_pages()``
(every page), for the sync and the async client. Each call makes a
:class:`~bizmsg._pagination.PageSource` from its arguments and asks it for pages: the source
links every page to itself, so ``page.next_page()`` repeats the call for the next page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar, Generic, Literal, TypeVar, overload

from .. import _native
from .._pagination import AsyncPage, Page, PageSource, items_of, items_of_async
from .._timeout import TimeoutArg, call_timeout
from ..models import BusinessAccount, BusinessPhoneNumber
from . import Resource

__all__ = ["BusinessAccounts", "BusinessPhoneNumbers", "AsyncBusinessAccounts",
           "AsyncBusinessPhoneNumbers"]

ItemT = TypeVar("ItemT", BusinessAccount, BusinessPhoneNumber)


def _request_size(page_size: object) -> Any:
    """``iter()``'s page size, which only sizes its requests: above the service's maximum, the
    maximum (``list()`` and ``iter_pages()`` keep it strict: there it is what a page holds).
    Anything that is not a whole number is left for the usual check to refuse."""
    if isinstance(page_size, int) and not isinstance(page_size, bool):
        return min(page_size, _native.MAX_PAGE_SIZE)
    return page_size


class _Listing(Resource, Generic[ItemT]):
    """What both listings share; ``_KIND`` tells the Rust side which one."""

    __slots__ = ()
    _KIND: ClassVar[_native.Listing]

    def _source(self, page_size: int, timeout: TimeoutArg, max_retries: int | None
                ) -> PageSource:
        return PageSource(self._native, self._KIND, page_size, call_timeout(timeout),
                          max_retries)


class _SyncListing(_Listing[ItemT]):
    __slots__ = ()

    @overload
    def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[False] = ...,
             timeout: TimeoutArg = ..., max_retries: int | None = ...) -> Page[ItemT]: ...
    @overload
    def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[True],
             timeout: TimeoutArg = ..., max_retries: int | None = ...) -> dict[str, Any]: ...

    def list(self, *, page_no: int = 1, page_size: int = 20, raw: bool = False,
             timeout: TimeoutArg = None, max_retries: int | None = None
             ) -> Page[ItemT] | dict[str, Any]:
        """One page (``page_no`` from 1, ``page_size`` 1 to 1000). ``raw=True`` returns the
        JSON object exactly as received."""
        return self._source(page_size, timeout, max_retries).page(page_no, raw)

    def iter(self, *, page_size: int = 100, limit: int | None = None, timeout: TimeoutArg = None,
             max_retries: int | None = None) -> Iterator[ItemT]:
        """Every item across pages, lazily. ``limit`` caps the number of items in total;
        ``page_size`` is only the request size, so one over the service's maximum (1000) asks
        for pages of 1000. The next page is fetched in the background while you consume the
        current one (one page ahead, never more)."""
        return items_of(self._source(_request_size(page_size), timeout, max_retries)
                        .stream(1, limit))

    def iter_pages(self, *, page_size: int = 100, page_no: int = 1, timeout: TimeoutArg = None,
                   max_retries: int | None = None) -> Iterator[Page[ItemT]]:
        """Every page from ``page_no`` on, lazily, reading one page ahead."""
        source = self._source(page_size, timeout, max_retries)
        return source.pages(source.stream(page_no, None))


class _AsyncListing(_Listing[ItemT]):
    __slots__ = ()

    @overload
    async def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[False] = ...,
                   timeout: TimeoutArg = ..., max_retries: int | None = ...) -> AsyncPage[ItemT]: ...
    @overload
    async def list(self, *, page_no: int = ..., page_size: int = ..., raw: Literal[True],
                   timeout: TimeoutArg = ..., max_retries: int | None = ...) -> dict[str, Any]: ...

    async def list(self, *, page_no: int = 1, page_size: int = 20, raw: bool = False,
                   timeout: TimeoutArg = None, max_retries: int | None = None
                   ) -> AsyncPage[ItemT] | dict[str, Any]:
        """Awaitable: one page (``page_no`` from 1, ``page_size`` 1 to 1000). ``raw=True``
        returns the JSON object exactly as received."""
        return await self._source(page_size, timeout, max_retries).page_async(page_no, raw)

    def iter(self, *, page_size: int = 100, limit: int | None = None, timeout: TimeoutArg = None,
             max_retries: int | None = None) -> AsyncIterator[ItemT]:
        """``async for`` over every item across pages; ``limit`` caps the items in total,
        ``page_size`` is only the request size (over 1000, pages of 1000); one page is read
        ahead."""
        return items_of_async(self._source(_request_size(page_size), timeout, max_retries)
                              .stream(1, limit))

    def iter_pages(self, *, page_size: int = 100, page_no: int = 1, timeout: TimeoutArg = None,
                   max_retries: int | None = None) -> AsyncIterator[AsyncPage[ItemT]]:
        """``async for`` over every page from ``page_no`` on, reading one page ahead."""
        source = self._source(page_size, timeout, max_retries)
        return source.pages_async(source.stream(page_no, None))


class BusinessAccounts(_SyncListing[BusinessAccount]):
    """``client.business_accounts``: the caller's business accounts, each with its numbers."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessAccounts


class BusinessPhoneNumbers(_SyncListing[BusinessPhoneNumber]):
    """``client.business_phone_numbers``: the caller's business phone numbers."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessPhoneNumbers


class AsyncBusinessAccounts(_AsyncListing[BusinessAccount]):
    """``client.business_accounts`` of an :class:`AsyncClient`."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessAccounts


class AsyncBusinessPhoneNumbers(_AsyncListing[BusinessPhoneNumber]):
    """``client.business_phone_numbers`` of an :class:`AsyncClient`."""

    __slots__ = ()
    _KIND = _native.Listing.BusinessPhoneNumbers
