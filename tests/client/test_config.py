"""Client configuration: environment variables, base URL rules, tokens (strings and
callables), headers, ``with_options``, timeouts, proxies and TLS settings."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import bizmsg
from bizmsg.testing import Sandbox
from conftest import Number, free_port

USER_AGENT = f"bizmsg-python/{bizmsg.__version__}"


def test_environment_variables_are_used(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox) -> None:
    monkeypatch.setenv("BIZMSG_TOKEN", sandbox.tenant_tokens["globex"])
    monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
    with bizmsg.Client() as client:
        assert client.base_url == sandbox.base_url
        page = client.business_accounts.list(page_size=1)
    [record] = sandbox.requests()
    assert record["headers"]["authorization"] == "Bearer sandbox-token-globex"
    assert record["tenant"] == "globex"
    assert page.data[0].name == "Globex Support"


async def test_environment_variables_are_used_by_the_async_client(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    monkeypatch.setenv("BIZMSG_TOKEN", sandbox.token)
    monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
    async with bizmsg.AsyncClient() as client:
        await client.business_phone_numbers.list(page_size=1)
    assert sandbox.requests()[0]["headers"]["authorization"] == f"Bearer {sandbox.token}"


def test_arguments_win_over_environment_variables(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    monkeypatch.setenv("BIZMSG_TOKEN", "env-token")
    monkeypatch.setenv("BIZMSG_BASE_URL", "https://env.example.com")
    with bizmsg.Client(sandbox.token, base_url=sandbox.base_url) as client:
        client.business_accounts.list()
    assert sandbox.requests()[0]["headers"]["authorization"] == f"Bearer {sandbox.token}"


def test_empty_environment_variables_count_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIZMSG_TOKEN", "")
    monkeypatch.setenv("BIZMSG_BASE_URL", "")
    with pytest.raises(bizmsg.ConfigurationError, match="BIZMSG_TOKEN"):
        bizmsg.Client()


@pytest.mark.parametrize(
    ("token", "what"),
    [("has space", "space"), ("line\nfeed", "line feed"), ("carriage\rreturn", "carriage return"),
     ("tab\there", "tab"), ("", "empty"), ("inject\r\nX-Evil: 1", "carriage return")],
)
def test_tokens_with_whitespace_or_control_characters_are_refused(
    sandbox: Sandbox, token: str, what: str
) -> None:
    for cls in (bizmsg.Client, bizmsg.AsyncClient):
        with pytest.raises(bizmsg.ConfigurationError) as caught:
            cls(token, base_url=sandbox.base_url)
        assert what in str(caught.value)
        if token:
            assert token not in str(caught.value)
    assert sandbox.requests() == []


def test_a_token_callable_returning_a_bad_token_is_refused_before_sending(sandbox: Sandbox) -> None:
    with bizmsg.Client(lambda: "bad token\r\n", base_url=sandbox.base_url) as client:
        with pytest.raises(bizmsg.ConfigurationError) as caught:
            client.business_accounts.list()
    assert "bad token" not in str(caught.value)
    assert sandbox.requests() == []


@pytest.mark.parametrize(
    "base_url",
    ["http://api.example.com", "http://10.0.0.8:8080", "http://[2001:db8::1]/"],
)
def test_plain_http_to_a_remote_host_needs_allow_insecure_http(base_url: str) -> None:
    with pytest.raises(bizmsg.ConfigurationError) as caught:
        bizmsg.Client("t", base_url=base_url)
    assert "allow_insecure_http" in str(caught.value)
    with pytest.raises(bizmsg.ConfigurationError):
        bizmsg.AsyncClient("t", base_url=base_url)
    bizmsg.Client("t", base_url=base_url, allow_insecure_http=True).close()


@pytest.mark.parametrize(
    "base_url", ["http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9", "https://api.example.com"]
)
def test_loopback_http_and_https_are_accepted(base_url: str) -> None:
    with bizmsg.Client("t", base_url=base_url) as client:
        assert client.base_url == base_url.rstrip("/")


@pytest.mark.parametrize("base_url", ["ftp://example.com", "not a url", "https://h/?a=1", "https://h/#x"])
def test_unusable_base_urls_are_refused(base_url: str) -> None:
    with pytest.raises(bizmsg.ConfigurationError):
        bizmsg.Client("t", base_url=base_url)


@pytest.mark.parametrize("base_url", ["https://user:s3cret@api.example.com",
                                      "https://s3cret@api.example.com",
                                      "https://s3cret:@api.example.com",
                                      "http://:s3cret@127.0.0.1:9"])
def test_a_base_url_with_credentials_is_refused_without_showing_them(base_url: str) -> None:
    """The service authenticates with the token: a user or password in ``base_url`` was used for
    nothing, and shown by ``repr(client)`` and by errors naming the service."""
    with pytest.raises(bizmsg.ConfigurationError, match="must not carry a user or password") as e:
        bizmsg.Client("t", base_url=base_url)
    assert "s3cret" not in str(e.value)


def test_a_base_url_path_prefix_is_kept(sandbox: Sandbox) -> None:
    with bizmsg.Client(sandbox.token, base_url=sandbox.base_url + "/gateway/", max_retries=0) as c:
        assert c.base_url == sandbox.base_url + "/gateway"
        with pytest.raises(bizmsg.NotFoundError):
            c.business_phone_numbers.list()
    assert sandbox.requests()[0]["path"] == "/gateway/v1/chat/businessPhoneNumber"


def test_authorization_header_is_exactly_bearer_and_the_token(sandbox: Sandbox) -> None:
    with sandbox.client() as client:
        client.business_accounts.list()
    assert sandbox.requests()[0]["headers"]["authorization"] == "Bearer sandbox-token-acme"


def test_default_headers_and_user_agent(sandbox: Sandbox, sender: Number) -> None:
    headers = {"X-Team": "billing", "X-Trace": "a b c"}
    with sandbox.client(default_headers=headers) as client:
        client.business_accounts.list()
        client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    for record in sandbox.requests():
        assert record["headers"]["x-team"] == "billing"
        assert record["headers"]["x-trace"] == "a b c"
        assert record["headers"]["user-agent"] == USER_AGENT


def test_user_agent_can_be_overridden_by_a_default_header(sandbox: Sandbox) -> None:
    with sandbox.client(default_headers={"User-Agent": "my-app/2.0"}) as client:
        client.business_accounts.list()
    assert sandbox.requests()[0]["headers"]["user-agent"] == "my-app/2.0"


@pytest.mark.parametrize(
    "headers",
    [{"X-Bad": "a\r\nX-Evil: 1"}, {"X-Bad": "line\nfeed"}, {"Bad Name": "v"},
     {"Authorization": "Bearer other"}],
)
def test_bad_default_headers_are_refused(sandbox: Sandbox, headers: dict[str, str]) -> None:
    with pytest.raises(bizmsg.ConfigurationError):
        sandbox.client(default_headers=headers)
    with sandbox.client() as client:
        with pytest.raises(bizmsg.ConfigurationError):
            client.with_options(headers=headers)
    assert sandbox.requests() == []


def test_default_headers_cannot_replace_the_per_send_idempotency_key(
    sandbox: Sandbox, sender: Number
) -> None:
    try:
        client = sandbox.client(default_headers={"Idempotency-Key": "fixed"})
    except bizmsg.ConfigurationError:
        return  # refusing the header is a fine answer too
    with client:
        first = client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en")
        second = client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en")
    sent = sandbox.sent_messages()
    assert first.sms_id != second.sms_id
    assert [r["idempotent_replay"] for r in sent] == [False, False]
    assert first.meta is not None and second.meta is not None
    assert [r["headers"]["idempotency-key"] for r in sent] == [
        first.meta.idempotency_key, second.meta.idempotency_key]


def test_framing_headers_cannot_be_set_as_default_headers(sandbox: Sandbox) -> None:
    try:
        client = sandbox.client(default_headers={"Content-Length": "5"}, max_retries=0)
    except bizmsg.ConfigurationError:
        return
    with client:
        assert len(client.business_accounts.list(timeout=1.0)) == 3


def test_with_options_shares_the_pool_and_overrides_per_handle(sandbox: Sandbox) -> None:
    client = sandbox.client(max_retries=0, default_headers={"X-A": "1"})
    derived = client.with_options(max_retries=2, headers={"X-B": "2"}, timeout=7.5)
    assert (client.max_retries, derived.max_retries) == (0, 2)
    assert derived.timeout == bizmsg.Timeout(connect=10.0, read=None, total=7.5)
    assert client.timeout == bizmsg.Timeout(connect=10.0, read=None, total=30.0)
    assert type(derived) is bizmsg.Client
    assert derived.base_url == client.base_url

    sandbox.inject("business_accounts", status=503, headers={"Retry-After": "0"})
    assert len(derived.business_accounts.list()) == 3  # retried thanks to max_retries=2
    with pytest.raises(bizmsg.ServerError):
        sandbox.inject("business_accounts", status=503)
        client.business_accounts.list()  # the original still has max_retries=0
    first, second, third = sandbox.requests()
    assert (first["headers"]["x-a"], first["headers"]["x-b"]) == ("1", "2")
    assert "x-b" not in third["headers"]
    assert second["status"] == 200

    # One pool: closing the original closes every handle derived from it.
    client.close()
    assert derived.is_closed
    with pytest.raises(bizmsg.ClientClosedError):
        derived.business_accounts.list()


def test_with_options_per_request_does_not_leak(sandbox: Sandbox) -> None:
    with sandbox.client() as client:
        for i in range(200):
            client.with_options(headers={"X-Request-No": str(i)})
        client.with_options(headers={"X-Request-No": "last"}).business_accounts.list(page_size=1)
    [record] = sandbox.requests()
    assert record["headers"]["x-request-no"] == "last"


def test_with_options_handles_reuse_one_keep_alive_connection(sandbox: Sandbox) -> None:
    # Sequential calls through many derived handles all travel on the first handle's
    # connection: one pool, no new connections per with_options().
    with sandbox.client() as client:
        client.business_accounts.list(page_size=1)
        for i in range(30):
            derived = client.with_options(headers={"X-Request-No": str(i)}, max_retries=1)
            derived.business_phone_numbers.list(page_size=1)
    connections = {record["connection"] for record in sandbox.requests()}
    assert connections == {1}
    assert len(sandbox.requests()) == 31


def test_separate_clients_do_not_share_connections(sandbox: Sandbox) -> None:
    with sandbox.client() as first, sandbox.client() as second:
        first.business_accounts.list(page_size=1)
        second.business_accounts.list(page_size=1)
    assert [record["connection"] for record in sandbox.requests()] == [1, 2]


async def test_async_with_options(sandbox: Sandbox) -> None:
    async with sandbox.async_client() as client:
        derived = client.with_options(headers={"X-From": "async"}, max_retries=0)
        assert type(derived) is bizmsg.AsyncClient
        sandbox.inject("business_phone_numbers", status=503)
        with pytest.raises(bizmsg.ServerError):
            await derived.business_phone_numbers.list()
        assert len(await derived.business_phone_numbers.list(page_size=2)) == 2
    assert [r["headers"].get("x-from") for r in sandbox.requests()] == ["async", "async"]
    assert derived.is_closed


# --- tokens ----------------------------------------------------------------------------------


def test_token_callable_is_asked_per_call(sandbox: Sandbox) -> None:
    tokens = iter(["sandbox-token-acme", "sandbox-token-globex"])
    calls: list[int] = []

    def provider() -> str:
        calls.append(1)
        return next(tokens)

    with bizmsg.Client(provider, base_url=sandbox.base_url) as client:
        first = client.business_accounts.list(page_size=1)
        second = client.business_accounts.list(page_size=1)
    assert len(calls) == 2
    assert [r["tenant"] for r in sandbox.requests()] == ["acme", "globex"]
    assert first.data[0].name == "Acme Support" and second.data[0].name == "Globex Support"


def test_token_callable_is_asked_again_after_a_401_and_the_call_retried_once(
    sandbox: Sandbox, sender: Number
) -> None:
    tokens = iter(["expired", "sandbox-token-acme", "expired-again", "still-bad"])
    with bizmsg.Client(lambda: next(tokens), base_url=sandbox.base_url, max_retries=0) as client:
        result = client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
        assert result.meta is not None and result.meta.attempts == 2
        # A second 401 after the refresh is the caller's: retried once, never more.
        with pytest.raises(bizmsg.AuthenticationError):
            client.business_accounts.list()
    auth = [(r["headers"]["authorization"], r["status"]) for r in sandbox.requests()]
    assert auth == [
        ("Bearer expired", 401),
        ("Bearer sandbox-token-acme", 200),
        ("Bearer expired-again", 401),
        ("Bearer still-bad", 401),
    ]
    first, second = sandbox.sent_messages()
    # The refused attempt was not processed, so the retry is the same send with the same key.
    assert first["headers"]["idempotency-key"] == second["headers"]["idempotency-key"]


def test_a_failing_token_callable_is_a_configuration_error(sandbox: Sandbox) -> None:
    def provider() -> str:
        raise RuntimeError("vault unreachable")

    with bizmsg.Client(provider, base_url=sandbox.base_url) as client:
        with pytest.raises(bizmsg.ConfigurationError, match="vault unreachable"):
            client.business_accounts.list()
    with bizmsg.Client(lambda: 42, base_url=sandbox.base_url) as client:  # type: ignore[arg-type, return-value]
        with pytest.raises(bizmsg.ConfigurationError, match="not a string"):
            client.business_accounts.list()
    assert sandbox.requests() == []


def test_the_sync_client_refuses_an_async_token_callable(sandbox: Sandbox) -> None:
    async def provider() -> str:
        return sandbox.token

    with pytest.raises(bizmsg.ConfigurationError, match="AsyncClient"):
        bizmsg.Client(provider, base_url=sandbox.base_url)  # type: ignore[arg-type]


@pytest.mark.parametrize("token", [123, b"bytes", ["t"]])
def test_token_must_be_a_string_or_callable(token: Any) -> None:
    with pytest.raises(bizmsg.ConfigurationError, match="token"):
        bizmsg.Client(token, base_url="https://api.example.com")


async def test_async_client_takes_sync_and_async_token_callables(sandbox: Sandbox) -> None:
    seen: list[str] = []

    async def async_provider() -> str:
        await asyncio.sleep(0)
        seen.append("async")
        return sandbox.tenant_tokens["globex"]

    def sync_provider() -> str:
        seen.append("sync")
        return sandbox.token

    async with bizmsg.AsyncClient(async_provider, base_url=sandbox.base_url) as a, \
            bizmsg.AsyncClient(sync_provider, base_url=sandbox.base_url) as s:
        await a.business_accounts.list()
        await s.business_accounts.list()
    assert seen == ["async", "sync"]
    assert [r["tenant"] for r in sandbox.requests()] == ["globex", "acme"]


async def test_async_token_callable_refreshes_after_a_401(sandbox: Sandbox) -> None:
    tokens = iter(["stale", sandbox.token])

    async def provider() -> str:
        return next(tokens)

    async with bizmsg.AsyncClient(provider, base_url=sandbox.base_url) as client:
        page = await client.business_phone_numbers.list(page_size=1)
    assert page.meta is not None and page.meta.attempts == 2
    assert [r["status"] for r in sandbox.requests()] == [401, 200]


# --- timeouts, retries settings ------------------------------------------------------------


def test_timeout_settings() -> None:
    assert bizmsg.DEFAULT_TIMEOUT == bizmsg.Timeout(connect=10.0, total=30.0)
    assert bizmsg.DEFAULT_MAX_RETRIES == 2
    with bizmsg.Client("t", base_url="https://api.example.com") as client:
        assert client.timeout == bizmsg.Timeout(connect=10.0, read=None, total=30.0)
        assert client.max_retries == 2
    with bizmsg.Client("t", base_url="https://api.example.com", timeout=5, max_retries=4) as client:
        assert client.timeout == bizmsg.Timeout(connect=10.0, read=None, total=5.0)
        assert client.max_retries == 4
    timeout = bizmsg.Timeout(connect=1.0, read=2.0, total=3.0)
    with bizmsg.Client("t", base_url="https://api.example.com", timeout=timeout) as client:
        assert client.timeout == timeout


@pytest.mark.parametrize(
    "parts", [{"total": 0}, {"read": -1}, {"connect": float("nan")}, {"total": float("inf")}]
)
def test_bad_timeouts_are_refused(parts: dict[str, float]) -> None:
    with pytest.raises(bizmsg.ConfigurationError):
        bizmsg.Timeout(**parts)


@pytest.mark.parametrize("timeout", [0, -1.5, float("nan")])
def test_bad_plain_timeouts_are_refused(sandbox: Sandbox, timeout: float) -> None:
    with pytest.raises(bizmsg.ConfigurationError):
        bizmsg.Client("t", base_url="https://api.example.com", timeout=timeout)
    with sandbox.client() as client:
        with pytest.raises(bizmsg.ConfigurationError):
            client.business_accounts.list(timeout=timeout)
    assert sandbox.requests() == []


@pytest.mark.parametrize("max_retries", [-1, 101, 1.5, "2", True])
def test_bad_max_retries_are_refused(sandbox: Sandbox, max_retries: Any) -> None:
    with pytest.raises(bizmsg.BizmsgError) as caught:
        bizmsg.Client("t", base_url="https://api.example.com", max_retries=max_retries)
    assert "max_retries" in str(caught.value)
    with sandbox.client() as client:
        with pytest.raises(bizmsg.BizmsgError):
            client.business_accounts.list(max_retries=max_retries)
    assert sandbox.requests() == []


def test_per_call_timeout_overrides_the_client(sandbox: Sandbox) -> None:
    sandbox.inject("business_accounts", delay=0.5, times=2)
    with sandbox.client(timeout=0.2, max_retries=0) as client:
        with pytest.raises(bizmsg.TimeoutError):
            client.business_accounts.list()
        page = client.business_accounts.list(timeout=3.0)
    assert len(page) == 3


def test_timeout_object_total_bounds_the_call(sandbox: Sandbox) -> None:
    sandbox.inject("business_phone_numbers", delay=1.0)
    with sandbox.client(max_retries=0) as client:
        started = time.monotonic()
        with pytest.raises(bizmsg.TimeoutError):
            client.business_phone_numbers.list(timeout=bizmsg.Timeout(total=0.3))
        assert time.monotonic() - started < 0.9


def test_timeout_connect_plus_read_bounds_one_attempt(sandbox: Sandbox) -> None:
    sandbox.inject("business_phone_numbers", delay=1.0, times=2)
    timeout = bizmsg.Timeout(connect=0.2, read=0.2)
    with sandbox.client(max_retries=0, timeout=timeout) as client:
        started = time.monotonic()
        with pytest.raises(bizmsg.TimeoutError):
            client.business_phone_numbers.list()
        assert time.monotonic() - started < 0.9
    # `connect` is the pool's: given per call it does not change the pool (documented).
    with sandbox.client(max_retries=0, timeout=timeout) as client:
        started = time.monotonic()
        with pytest.raises(bizmsg.TimeoutError):
            client.business_phone_numbers.list(timeout=bizmsg.Timeout(connect=30.0, read=0.2))
        assert time.monotonic() - started < 0.9


def test_read_timeout_alone_bounds_one_attempt(sandbox: Sandbox) -> None:
    sandbox.inject("business_phone_numbers", delay=1.0)
    with sandbox.client(max_retries=0) as client:
        started = time.monotonic()
        with pytest.raises(bizmsg.TimeoutError):
            client.business_phone_numbers.list(timeout=bizmsg.Timeout(read=0.3))
        assert time.monotonic() - started < 0.9


@pytest.mark.parametrize("where", ["call", "client"])
def test_a_huge_timeout_is_not_an_internal_error(sandbox: Sandbox, where: str) -> None:
    try:
        client = sandbox.client(timeout=1e19) if where == "client" else sandbox.client()
        with client:
            page = client.business_accounts.list(timeout=1e19 if where == "call" else None)
    except bizmsg.ConfigurationError:
        return  # refusing it is a fine answer too
    assert len(page) == 3


# --- proxies and TLS -----------------------------------------------------------------------


def test_proxy_setting_is_used(sandbox: Sandbox) -> None:
    dead_proxy = f"http://127.0.0.1:{free_port()}"
    with sandbox.client(proxy=dead_proxy, max_retries=0) as client:
        with pytest.raises(bizmsg.ConnectError):
            client.business_accounts.list()
    assert sandbox.requests() == []  # it went to the (dead) proxy, not to the sandbox


def _only_http_proxy(monkeypatch: pytest.MonkeyPatch, proxy: str) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("http_proxy", proxy)


def test_proxy_environment_and_no_proxy_are_honoured_for_a_remote_service(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    # The sandbox plays the proxy: a proxied request arrives in absolute form for
    # api.example.test, and the sandbox serves it by its path.
    _only_http_proxy(monkeypatch, sandbox.base_url)
    remote = dict(token=sandbox.token, base_url="http://api.example.test",
                  allow_insecure_http=True, max_retries=0)
    with bizmsg.Client(**remote) as client:  # type: ignore[arg-type]
        assert len(client.business_accounts.list()) == 3
    [proxied] = sandbox.requests()
    assert proxied["headers"]["host"] == "api.example.test"
    monkeypatch.setenv("NO_PROXY", "api.example.test")
    monkeypatch.setenv("no_proxy", "api.example.test")
    with bizmsg.Client(**remote) as client:  # type: ignore[arg-type]
        with pytest.raises(bizmsg.ConnectError):  # direct: the name does not resolve
            client.business_accounts.list()
    assert len(sandbox.requests()) == 1


def test_environment_proxies_are_not_used_for_plain_http_to_loopback(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    # Regression: an HTTP_PROXY took a loopback http:// call (and its token, in clear text)
    # to the proxy.
    _only_http_proxy(monkeypatch, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with sandbox.client(max_retries=0) as client:
        assert len(client.business_accounts.list()) == 3
    assert len(sandbox.requests()) == 1


def test_an_explicit_proxy_honours_no_proxy(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    dead_proxy = f"http://127.0.0.1:{free_port()}"
    with sandbox.client(proxy=dead_proxy, max_retries=0) as client:
        assert len(client.business_accounts.list()) == 3


def test_bad_proxy_is_a_configuration_error() -> None:
    with pytest.raises(bizmsg.ConfigurationError, match="proxy"):
        bizmsg.Client("t", base_url="https://api.example.com", proxy="::not a proxy::")


def test_verify_takes_a_bool_or_a_ca_bundle_path(tmp_path: Any) -> None:
    bizmsg.Client("t", base_url="https://api.example.com", verify=False).close()
    bizmsg.Client("t", base_url="https://api.example.com", verify=True).close()
    with pytest.raises(bizmsg.ConfigurationError, match="cannot read"):
        bizmsg.Client("t", base_url="https://api.example.com", verify=str(tmp_path / "missing.pem"))
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificates here\n")
    with pytest.raises(bizmsg.ConfigurationError):
        bizmsg.Client("t", base_url="https://api.example.com", verify=str(empty))


def test_verify_accepts_a_real_ca_bundle() -> None:
    import ssl

    bundle = ssl.get_default_verify_paths().cafile
    if bundle is None:
        pytest.skip("no system CA bundle")
    bizmsg.Client("t", base_url="https://api.example.com", verify=bundle).close()


def test_bizmsg_log_info_shows_no_debug_lines(sandbox: Sandbox) -> None:
    import subprocess
    import sys

    script = (
        "import bizmsg\n"
        f"c = bizmsg.Client({sandbox.token!r}, base_url={sandbox.base_url!r})\n"
        "c.business_accounts.list()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env={"BIZMSG_LOG": "info"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert " DEBUG " not in done.stderr
    assert len(sandbox.requests()) == 1


def test_repr_shows_no_token(sandbox: Sandbox) -> None:
    with sandbox.client() as client:
        text = repr(client)
    assert text == f"Client(base_url={sandbox.base_url!r}, token=<redacted>)"
    assert sandbox.token not in text
    aclient = sandbox.async_client()
    assert repr(aclient) == f"AsyncClient(base_url={sandbox.base_url!r}, token=<redacted>)"
    aclient.close()


@pytest.mark.parametrize("codes", ["10", b"0", 0])
def test_success_codes_must_be_a_collection_of_codes(sandbox: Sandbox, codes: Any) -> None:
    # Regression: "10" was split into the codes "1" and "0", so code 1 passed as success.
    with pytest.raises(bizmsg.ConfigurationError, match="success_codes"):
        sandbox.client(success_codes=codes)


def test_success_codes_may_mix_numbers_and_strings(sandbox: Sandbox, sender: Number) -> None:
    with sandbox.client(success_codes=[0, "200"]) as client:
        result = client.messages.send_template(
            to="14155550100", from_=sender.digits, name="n", parameters="p", language="en"
        )
    assert result.ok


def test_closing_a_with_options_handle_leaves_its_parent_open(sandbox: Sandbox) -> None:
    # Regression: `with client.with_options(...) as c:` closed the shared pool for good.
    client = sandbox.client()
    with client.with_options(timeout=5.0) as derived:
        derived.business_accounts.list(page_size=1)
    assert not client.is_closed
    assert len(client.business_accounts.list(page_size=1)) == 1
    client.close()
    assert client.is_closed and derived.is_closed


@pytest.mark.parametrize("value", ["a\tb", " leading", "trailing ", "x\r\ny"])
def test_header_values_with_tabs_or_outer_whitespace_are_refused(value: str) -> None:
    with pytest.raises(bizmsg.ConfigurationError, match="X-Custom"):
        bizmsg.Client("t", base_url="https://api.example.com", default_headers={"X-Custom": value})


@pytest.mark.parametrize("name", ["Upgrade", "Expect", "TE", "Trailer", "Keep-Alive",
                                  "Proxy-Authorization", "Proxy-Connection"])
def test_headers_that_change_the_exchange_cannot_be_set(name: str) -> None:
    """A header asking for another exchange than one request and its answer
    (a protocol switch, an interim answer, trailers) belongs to the HTTP client."""
    with pytest.raises(bizmsg.ConfigurationError, match="HTTP client owns"):
        bizmsg.Client("t", base_url="https://api.example.com", default_headers={name: "x"})
    client = bizmsg.Client("t", base_url="https://api.example.com")
    with pytest.raises(bizmsg.ConfigurationError, match="HTTP client owns"):
        client.with_options(headers={name: "x"})


def test_the_http1_transport_forced_with_a_proxy_uses_it_or_refuses_it(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    """``BIZMSG_TRANSPORT=direct`` (the former name of ``http1``, still accepted) used to drop
    ``proxy=`` without a word. The HTTP/1.1 transport now speaks to http:// and https:// proxies (the dead ones here are
    what the call meets); SOCKS, which neither transport speaks, is refused."""
    monkeypatch.setenv("BIZMSG_TRANSPORT", "direct")
    for scheme in ("http", "https"):
        dead_proxy = f"{scheme}://127.0.0.1:{free_port()}"
        with sandbox.client(proxy=dead_proxy, max_retries=0) as client:
            assert client._native.transport == "http1"
            with pytest.raises(bizmsg.ConnectError, match="proxy"):
                client.business_accounts.list()
    assert sandbox.requests() == []
    with pytest.raises(bizmsg.ConfigurationError, match="SOCKS"):
        bizmsg.Client("t", base_url="https://api.example.com", proxy="socks5://127.0.0.1:1080")


def test_the_http2_transport_refuses_a_plain_http_service_behind_a_proxy(
    monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    """``BIZMSG_TRANSPORT=proxied`` (the former name of ``http2``, still accepted) speaks HTTP/2
    only, which an HTTP proxy does not forward: a plain http:// service behind a proxy is refused when the client is made, naming the
    proxy without its password; without a proxy it speaks h2c to the sandbox."""
    monkeypatch.setenv("BIZMSG_TRANSPORT", "proxied")
    with pytest.raises(bizmsg.ConfigurationError, match="HTTP/2 only") as refused:
        sandbox.client(proxy=f"http://user:s3cret@127.0.0.1:{free_port()}")
    assert "s3cret" not in str(refused.value)
    assert "http://127.0.0.1:" in str(refused.value)
    with sandbox.client() as client:
        assert client._native.transport == "http2"
        assert client.business_accounts.list().data
