"""examples/fastapi_app.py against the sandbox, through FastAPI's TestClient: each outcome of a
send maps to its HTTP answer, one AsyncClient serves the app's whole lifetime, and with tracing
on, bizmsg's spans are under the request's span and its traceparent reaches the service."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the FastAPI example needs fastapi")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

import bizmsg  # noqa: E402
from bizmsg.testing import Sandbox  # noqa: E402

EXAMPLE = Path(__file__).parents[2] / "examples" / "fastapi_app.py"


def load_example(path: Path, copy: str = "") -> ModuleType:
    name = f"bizmsg_example_{path.stem}{copy}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return load_example(EXAMPLE)


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def sender(sandbox: Sandbox) -> str:
    with sandbox.client() as client:
        number = next(n for n in client.business_phone_numbers.iter() if n.status == "CONNECTED")
    sandbox.clear_requests()
    assert number.display_phone_number is not None
    return number.display_phone_number


@pytest.fixture
def http(example: ModuleType, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    monkeypatch.setenv("BIZMSG_TOKEN", sandbox.token)
    monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
    with TestClient(example.app) as client:
        yield client


@pytest.fixture
def notification(sender: str) -> dict[str, Any]:
    return {"to": "+86 138 0013 8000", "from": sender, "template": "order_update",
            "parameters": ["A-1042"], "language": "en_US"}


def accepted(sandbox: Sandbox) -> list[dict[str, Any]]:
    """Send requests that made a message go out (accepted, not an idempotent replay)."""
    return [m for m in sandbox.sent_messages() if not m["idempotent_replay"]
            and (m["response_body"] or {}).get("status") == "ACCEPTED"]


def test_sent(http: Any, sandbox: Sandbox, notification: dict[str, Any]) -> None:
    response = http.post("/notifications", json=notification)
    assert response.status_code == 200, response.text
    body = response.json()
    [request] = sandbox.sent_messages()
    assert body == {"sms_id": request["response_body"]["smsId"], "status": "ACCEPTED",
                    "idempotency_key": request["headers"]["idempotency-key"]}
    assert request["body"]["to"] == "8613800138000"
    assert request["body"]["template"] == {"name": "order_update", "parameters": '["A-1042"]',
                                           "language": "en_US"}


def test_the_callers_idempotency_key_is_used(http: Any, sandbox: Sandbox,
                                             notification: dict[str, Any]) -> None:
    first = http.post("/notifications", json={**notification, "idempotency_key": "order-1042"})
    again = http.post("/notifications", json={**notification, "idempotency_key": "order-1042"})
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() and first.json()["idempotency_key"] == "order-1042"
    assert [m["idempotent_replay"] for m in sandbox.sent_messages()] == [False, True]


def test_one_client_for_the_apps_lifetime(example: ModuleType, sandbox: Sandbox,
                                          monkeypatch: pytest.MonkeyPatch,
                                          notification: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    monkeypatch.setenv("BIZMSG_TOKEN", sandbox.token)
    monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
    with TestClient(example.app) as http:
        client = example.app.state.bizmsg
        assert isinstance(client, bizmsg.AsyncClient) and client.base_url == sandbox.base_url
        for _ in range(3):
            assert http.post("/notifications", json=notification).status_code == 200
        assert example.app.state.bizmsg is client
    # One pool: the sends reused one keep-alive connection. Shutting down closed the client.
    assert len({m["connection"] for m in sandbox.sent_messages()}) == 1
    assert client.is_closed


def test_rejected_is_422_with_code_and_msg(http: Any, sandbox: Sandbox,
                                           notification: dict[str, Any]) -> None:
    response = http.post("/notifications", json={**notification, "from": "15550000000"})
    assert response.status_code == 422
    assert response.json() == {
        "error": "rejected", "code": "1002",
        "msg": 'from "15550000000" is not a business phone number of this account',
    }
    assert accepted(sandbox) == []


def test_unknown_outcome_is_202_with_the_key_to_reconcile(http: Any, sandbox: Sandbox,
                                                          notification: dict[str, Any]) -> None:
    sandbox.inject("send", cut_connection=True)  # processed, then no answer
    response = http.post("/notifications", json=notification)
    assert response.status_code == 202, response.text
    body = response.json()
    [request] = sandbox.sent_messages()
    assert body["status"] == "unknown"
    assert body["idempotency_key"] == request["headers"]["idempotency-key"]

    # Reconciling: the same request with the key gets the original result, sends nothing new.
    again = http.post("/notifications", json={**notification,
                                              "idempotency_key": body["idempotency_key"]})
    assert again.status_code == 200
    assert again.json()["sms_id"] == request["response_body"]["smsId"]
    assert len(accepted(sandbox)) == 1
    assert [m["idempotent_replay"] for m in sandbox.sent_messages()] == [False, True]


@pytest.mark.parametrize(("change", "field"), [
    ({"to": "12"}, "to"),
    ({"from": "not a number"}, "from"),
    ({"language": "english please"}, "language"),
    ({"template": ""}, "template"),
    ({"parameters": ["A", 2]}, None),  # refused by the body's schema
])
def test_invalid_is_400(http: Any, sandbox: Sandbox, notification: dict[str, Any],
                        change: dict[str, Any], field: str | None) -> None:
    response = http.post("/notifications", json={**notification, **change})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "invalid" and body["detail"]
    if field is not None:
        assert body["field"] == field
    assert sandbox.sent_messages() == []


def test_a_malformed_body_is_400_too(http: Any, notification: dict[str, Any]) -> None:
    body = {k: v for k, v in notification.items() if k != "from"}
    response = http.post("/notifications", json=body)
    assert response.status_code == 400
    assert "from" in response.json()["detail"]


def test_a_key_reused_for_another_message_is_409(http: Any, notification: dict[str, Any]) -> None:
    first = http.post("/notifications", json={**notification, "idempotency_key": "k-1"})
    assert first.status_code == 200
    other = http.post("/notifications", json={**notification, "to": "8613800138999",
                                              "idempotency_key": "k-1"})
    assert other.status_code == 409
    assert other.json()["error"] == "idempotency_key_reused"


def test_service_unavailable_is_502(http: Any, sandbox: Sandbox,
                                    notification: dict[str, Any]) -> None:
    # Busy on the first attempt and both retries (503 means "not processed": retried at once).
    sandbox.inject("send", status=503, headers={"Retry-After": "0"}, times=3)
    response = http.post("/notifications", json=notification)
    assert response.status_code == 502, response.text
    body = response.json()
    assert body["error"] == "upstream" and body["detail"].startswith("ServerError")
    assert body["request_id"].startswith("req_")
    assert len(sandbox.sent_messages()) == 3 and accepted(sandbox) == []


def test_a_refused_token_is_502(example: ModuleType, sandbox: Sandbox,
                                monkeypatch: pytest.MonkeyPatch,
                                notification: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    monkeypatch.setenv("BIZMSG_TOKEN", "revoked-token")
    monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
    with TestClient(example.app) as http:
        response = http.post("/notifications", json=notification)
    assert response.status_code == 502
    assert response.json()["detail"].startswith("AuthenticationError")
    assert accepted(sandbox) == []


def test_startup_fails_without_configuration(example: ModuleType,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    monkeypatch.delenv("BIZMSG_TOKEN", raising=False)
    monkeypatch.delenv("BIZMSG_BASE_URL", raising=False)
    with pytest.raises(bizmsg.ConfigurationError, match="BIZMSG_TOKEN"):
        with TestClient(example.app):
            pass


def test_a_traced_request_has_bizmsgs_spans_under_it(sandbox: Sandbox,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     notification: dict[str, Any]) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="tracing needs opentelemetry-sdk")
    pytest.importorskip("opentelemetry.instrumentation.fastapi",
                        reason="tracing needs opentelemetry-instrumentation-fastapi")
    from fastapi.testclient import TestClient
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from bizmsg.instrumentation import BizmsgInstrumentor

    # A copy of its own: FastAPI's instrumentation must come before the app's first request.
    example = load_example(EXAMPLE, copy="_traced")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    example.trace_requests(tracer_provider=provider)
    monkeypatch.setenv("BIZMSG_TOKEN", sandbox.token)
    monkeypatch.setenv("BIZMSG_BASE_URL", sandbox.base_url)
    try:
        with TestClient(example.app) as http:
            assert http.post("/notifications", json=notification).status_code == 200
    finally:
        BizmsgInstrumentor().uninstrument()
        FastAPIInstrumentor.uninstrument_app(example.app)

    spans = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans}

    def ancestors(span: Any) -> list[Any]:
        found = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            found.append(span)
        return found

    [request] = [s for s in spans if s.kind == SpanKind.SERVER]
    assert request.name == "POST /notifications"
    [send] = [s for s in spans if s.name == "send"]
    [attempt] = [s for s in spans if s.name == "POST /v1/chat/messages/send"]
    assert send.kind == SpanKind.PRODUCER and attempt.kind == SpanKind.CLIENT
    assert request in ancestors(send)
    assert ancestors(attempt)[:1] == [send] and request in ancestors(attempt)
    assert {s.context.trace_id for s in (request, send, attempt)} == {request.context.trace_id}

    # The service received the trace: the traceparent names the send span of that trace.
    [received] = sandbox.sent_messages()
    trace_id, flags = f"{request.context.trace_id:032x}", f"{send.context.trace_flags:02x}"
    assert send.context.trace_flags.sampled
    span_id = f"{send.context.span_id:016x}"
    assert received["headers"]["traceparent"] == f"00-{trace_id}-{span_id}-{flags}"
