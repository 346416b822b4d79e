"""A FastAPI service that sends notifications through bizmsg.

One ``bizmsg.AsyncClient`` lives as long as the app (made in the lifespan, from
``BIZMSG_TOKEN`` and ``BIZMSG_BASE_URL``): its connection pool is shared by every request.
``POST /notifications`` sends a template and maps what can happen to HTTP:

- 200: sent; ``sms_id``, ``status`` and the ``idempotency_key`` it went out with.
- 202: outcome unknown, the message may have gone out. Send the same request again with the
  returned ``idempotency_key`` to reconcile: a service that honours the key (the sandbox does;
  the spec does not say whether the real one does) answers with the original result instead
  of sending a second message.
- 400: an invalid request (a bad phone number, template or language; ``field`` names it).
- 409: the ``idempotency_key`` was already used for a different notification.
- 422: the service rejected the message: its ``code`` and ``msg``.
- 502: the messaging service failed or could not be reached (after bizmsg's own retries).

Serve it (``pip install fastapi uvicorn``)::

    BIZMSG_TOKEN=... BIZMSG_BASE_URL=https://... uvicorn fastapi_app:app --app-dir examples

or try it against the embedded sandbox, no service needed (``pip install fastapi httpx``)::

    python examples/fastapi_app.py

Tracing (OpenTelemetry): ``trace_requests()`` gives each request FastAPI's server span with
bizmsg's ``send`` span under it, and one span per HTTP attempt under that; the messaging
service receives the request's ``traceparent``. ``opentelemetry-instrument uvicorn ...`` does
the same with no code (``pip install "bizmsg[otel]" opentelemetry-instrumentation-fastapi``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

import bizmsg

logger = logging.getLogger("notifications")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncGenerator[None, None]:
    # One client for the app's lifetime; token and base URL from BIZMSG_TOKEN / BIZMSG_BASE_URL
    # (a missing one fails the startup with a ConfigurationError naming it).
    async with bizmsg.AsyncClient() as client:
        app.state.bizmsg = client
        yield


app = FastAPI(title="notifications", lifespan=lifespan)


def messaging(request: Request) -> bizmsg.AsyncClient:
    client: bizmsg.AsyncClient = request.app.state.bizmsg
    return client


Messaging = Annotated[bizmsg.AsyncClient, Depends(messaging)]


def trace_requests(tracer_provider: Any = None) -> None:
    """Traces each request, and bizmsg's calls inside it, with the given tracer provider (the
    global one by default: configure the SDK and an exporter as usual). Call it before the app
    serves its first request: FastAPI's instrumentation wraps the app's middleware stack."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    from bizmsg.instrumentation import BizmsgInstrumentor

    # The request's SERVER span, current while the endpoint runs...
    FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider)
    # ...so bizmsg's spans start under it, and its traceparent goes out with each request.
    BizmsgInstrumentor().instrument(tracer_provider=tracer_provider)


class Notification(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    to: str = Field(examples=["+86 138 0013 8000"])
    from_: str = Field(alias="from", description="a CONNECTED business number of yours")
    template: str = Field(examples=["order_update"])
    parameters: list[str] | dict[str, str] | str = Field(examples=[["A-1042"]])
    language: str = Field(examples=["en_US"])
    idempotency_key: str | None = Field(
        default=None,
        description="give one to make retries of this request safe; otherwise one is made",
    )


class Sent(BaseModel):
    sms_id: str | int | None
    status: str | int | None
    idempotency_key: str | None


class OutcomeUnknown(BaseModel):
    status: str = "unknown"
    idempotency_key: str
    detail: str


class Rejected(BaseModel):
    error: str = "rejected"
    code: str | int | None
    msg: str | None


class Problem(BaseModel):
    error: str
    detail: str
    field: str | None = None
    request_id: str | None = None


#: bizmsg's names for what it refused (``ValidationError.field``) -> this API's body fields.
BODY_FIELDS = {"from_": "from", "template.name": "template",
               "template.parameters": "parameters", "template.language": "language"}


@app.post(
    "/notifications",
    response_model=Sent,
    responses={
        202: {"model": OutcomeUnknown, "description": "may have been sent: retry with the key"},
        400: {"model": Problem, "description": "invalid request"},
        409: {"model": Problem, "description": "idempotency key reused for another message"},
        422: {"model": Rejected, "description": "rejected by the messaging service"},
        502: {"model": Problem, "description": "the messaging service failed"},
    },
)
async def send_notification(notification: Notification, client: Messaging) -> Any:
    try:
        result = await client.messages.send_template(
            to=notification.to,
            from_=notification.from_,
            name=notification.template,
            parameters=notification.parameters,
            language=notification.language,
            idempotency_key=notification.idempotency_key,
        )
    except bizmsg.SendRejectedError as error:
        return JSONResponse(status_code=422,
                            content=Rejected(code=error.code, msg=error.msg).model_dump())
    except bizmsg.SendOutcomeUnknownError as error:
        # Not retried by bizmsg (it may have been delivered): the caller re-sends with the key.
        logger.warning("send outcome unknown (key %s): %s", error.idempotency_key, error)
        body = OutcomeUnknown(
            idempotency_key=error.idempotency_key,
            detail="the message may or may not have been sent: send the same request again "
                   "with this idempotency_key to reconcile (the service answers a repeated key "
                   "with the original result instead of sending again)",
        )
        return JSONResponse(status_code=202, content=body.model_dump())
    except bizmsg.ValidationError as error:
        field = BODY_FIELDS.get(error.field or "", error.field)
        return JSONResponse(status_code=400, content=Problem(
            error="invalid", detail=str(error), field=field).model_dump(exclude_none=True))
    except bizmsg.ConflictError as error:
        return JSONResponse(status_code=409, content=Problem(
            error="idempotency_key_reused", detail=str(error),
            request_id=error.request_id).model_dump(exclude_none=True))
    except bizmsg.BizmsgError as error:
        logger.error("messaging service failed: %r", error)
        return JSONResponse(status_code=502, content=Problem(
            error="upstream", detail=f"{type(error).__name__}: {error}",
            request_id=getattr(error, "request_id", None)).model_dump(exclude_none=True))
    meta = result.meta
    return Sent(sms_id=result.sms_id, status=result.status,
                idempotency_key=meta.idempotency_key if meta else None)


@app.exception_handler(RequestValidationError)
async def invalid_body(request: Request, error: RequestValidationError) -> JSONResponse:
    # A malformed body is a 400 too, so that 422 means only "rejected by the service".
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'] if p != 'body')}: {e['msg']}" for e in error.errors()
    )
    body = Problem(error="invalid", detail=problems)
    return JSONResponse(status_code=400, content=body.model_dump(exclude_none=True))


def demo() -> None:
    """Runs the app in-process against the embedded sandbox and prints a few exchanges."""
    import os

    from fastapi.testclient import TestClient

    from bizmsg.testing import Sandbox

    with Sandbox() as sandbox:
        os.environ["BIZMSG_TOKEN"] = sandbox.token
        os.environ["BIZMSG_BASE_URL"] = sandbox.base_url
        with sandbox.client() as lookup:
            numbers = list(lookup.business_phone_numbers.iter())
        sender = next(n.display_phone_number for n in numbers if n.status == "CONNECTED")
        request = {"to": "+86 138 0013 8000", "from": sender, "template": "order_update",
                   "parameters": ["A-1042"], "language": "en_US"}

        with TestClient(app) as http:
            def post(label: str, body: dict[str, Any]) -> dict[str, Any]:
                response = http.post("/notifications", json=body)
                print(f"{label}: {response.status_code} {response.json()}")
                answer: dict[str, Any] = response.json()
                return answer

            post("sent", request)
            post("rejected", {**request, "from": "15550000000"})  # not a number of ours
            post("invalid", {**request, "to": "12"})
            sandbox.inject("send", cut_connection=True)  # processed, then the connection drops
            unknown = post("unknown", request)
            post("reconciled", {**request, "idempotency_key": unknown["idempotency_key"]})
        delivered = [m for m in sandbox.sent_messages() if not m["idempotent_replay"]
                     and (m["response_body"] or {}).get("status") == "ACCEPTED"]
        print(f"messages delivered: {len(delivered)} (the reconciled one went out once)")


if __name__ == "__main__":
    demo()
