"""The OpenAPI document of the service (docs/openapi.json) as the tests read it: its parts by
JSON pointer, a validator for any schema in it, and the check of an answer against the schema the
document gives for its operation and status (``sandbox/test_openapi_document.py`` checks the
document, ``sandbox/test_spec_conformance.py`` the sandbox against it)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT202012


DOCUMENT_PATH = Path(__file__).resolve().parents[1] / "docs" / "openapi.json"
DOCUMENT_URI = "urn:bizmsg:openapi"
DOCUMENT: dict[str, Any] = json.loads(DOCUMENT_PATH.read_text(encoding="utf-8"))

SEND = "/v1/chat/messages/send"
ACCOUNTS = "/v1/chat/businessAccounts"
NUMBERS = "/v1/chat/businessPhoneNumber"
LISTINGS = [ACCOUNTS, NUMBERS]
OPERATIONS = {SEND: "post", ACCOUNTS: "get", NUMBERS: "get"}


# --- Reading the document -------------------------------------------------------------------


def _ecma_pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """``pattern`` with ECMA-262's ``$``: JSON Schema's patterns are ECMA-262 regular
    expressions, where ``$`` is the end of the text; Python's also matches before a final
    newline, which would let ``"12345678\\n"`` pass as digits. The document puts ``$`` only at
    the end of a pattern (checked below)."""
    if validator.is_type(instance, "string") and not re.search(
        re.sub(r"\$$", r"\\Z", pattern), instance
    ):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


Validator = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})
REGISTRY: Registry[Any] = Registry().with_resource(
    DOCUMENT_URI, DRAFT202012.create_resource(DOCUMENT)
)


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def pointer_of(*tokens: str) -> str:
    return "".join("/" + escape(token) for token in tokens)


def at(pointer: str) -> Any:
    node: Any = DOCUMENT
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def follow(pointer: str) -> tuple[Any, str]:
    """The object at ``pointer``, through OpenAPI references (``$ref`` to ``#/...``)."""
    node = at(pointer)
    while isinstance(node, dict) and "$ref" in node:
        target = node["$ref"]
        assert target.startswith("#/"), f"{pointer}: only local references are used, got {target}"
        pointer = target[1:]
        node = at(pointer)
    return node, pointer


def schema_validator(pointer: str) -> Any:
    """A validator for the schema at ``pointer``, resolving its ``$ref``s within the document."""
    return Validator({"$ref": f"{DOCUMENT_URI}#{pointer}"}, registry=REGISTRY)


def assert_valid(pointer: str, instance: Any, what: str) -> None:
    errors = sorted(
        schema_validator(pointer).iter_errors(instance), key=lambda e: list(e.absolute_path)
    )
    assert not errors, f"{what} does not validate against {pointer}:\n" + "\n".join(
        f"- at {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:10]
    )


def is_valid(pointer: str, instance: Any) -> bool:
    return bool(schema_validator(pointer).is_valid(instance))


def operation_pointer(path: str) -> str:
    return pointer_of("paths", path, OPERATIONS[path])


def check_answer(path: str, response: httpx.Response, status: int) -> Any:
    """Asserts that ``response`` has ``status``, that the document lists that status for the
    operation, and that the answer's headers and body are the documented ones. Returns the
    decoded body."""
    request = response.request
    what = f"{request.method} {request.url.raw_path.decode()} -> {response.status_code}"
    assert response.status_code == status, f"{what}, expected {status}: {response.text[:500]}"
    responses = pointer_of("paths", path, OPERATIONS[path], "responses")
    assert str(status) in at(responses), (
        f"{what}: the document does not list {status} for this operation"
    )
    documented, documented_at = follow(f"{responses}/{status}")
    check_headers(documented, documented_at, response, what)
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    assert media in documented["content"], f"{what}: Content-Type {media!r} is not documented"
    body = response.json()
    assert_valid(f"{documented_at}/content/{escape(media)}/schema", body, what)
    return body


def check_headers(
    documented: dict[str, Any], documented_at: str, response: httpx.Response, what: str
) -> None:
    for name in documented.get("headers", {}):
        header, header_at = follow(f"{documented_at}/headers/{escape(name)}")
        value = response.headers.get(name)
        if value is None:
            assert not header.get("required"), f"{what}: required header {name} is missing"
            continue
        assert_valid(f"{header_at}/schema", value, f"{what}: header {name}")
