"""The OpenAPI document of the service (docs/openapi.json) checked on its own, before the
sandbox is checked against it (``test_spec_conformance.py``): its shape as OpenAPI 3.1, every
schema in it against the JSON Schema 2020-12 meta-schema, every reference resolved, its own
examples valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator


from openapi_support import (
    assert_valid,
    at,
    DOCUMENT,
    escape,
    follow,
    LISTINGS,
    operation_pointer,
    OPERATIONS,
)


# --- The document itself --------------------------------------------------------------------

EXTENSIONS = {"^x-": {}}


def closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object with these fields, and extensions (``x-...``) only besides."""
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "patternProperties": EXTENSIONS,
        "additionalProperties": False,
    }


REFERENCE = {
    "type": "object",
    "required": ["$ref"],
    "properties": {"$ref": {"type": "string", "pattern": "^#/"}},
}
STRING = {"type": "string"}
MAP = {"type": "object"}

#: The shape of an OpenAPI 3.1 document, for the objects this one uses (written from the
#: OpenAPI 3.1.0 specification's object tables): a misspelt or misplaced field fails.
OPENAPI_SHAPE: dict[str, Any] = {
    "$defs": {
        "schema": {"type": ["object", "boolean"]},
        "header": closed(
            {
                "description": STRING,
                "required": {"type": "boolean"},
                "deprecated": {"type": "boolean"},
                "schema": {"$ref": "#/$defs/schema"},
            },
            ["schema"],
        ),
        "parameter": closed(
            {
                "name": STRING,
                "in": {"enum": ["query", "header", "path", "cookie"]},
                "description": STRING,
                "required": {"type": "boolean"},
                "deprecated": {"type": "boolean"},
                "allowEmptyValue": {"type": "boolean"},
                "style": STRING,
                "explode": {"type": "boolean"},
                "schema": {"$ref": "#/$defs/schema"},
                "example": {},
                "examples": MAP,
            },
            ["name", "in", "schema"],
        ),
        "media": closed(
            {"schema": {"$ref": "#/$defs/schema"}, "example": {}, "examples": MAP, "encoding": MAP},
            ["schema"],
        ),
        "content": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {"$ref": "#/$defs/media"},
        },
        "response": closed(
            {
                "description": STRING,
                "headers": {
                    "type": "object",
                    "additionalProperties": {"oneOf": [REFERENCE, {"$ref": "#/$defs/header"}]},
                },
                "content": {"$ref": "#/$defs/content"},
                "links": MAP,
            },
            ["description"],
        ),
        "operation": closed(
            {
                "tags": {"type": "array", "items": STRING},
                "summary": STRING,
                "description": STRING,
                "externalDocs": MAP,
                "operationId": STRING,
                "parameters": {
                    "type": "array",
                    "items": {"oneOf": [REFERENCE, {"$ref": "#/$defs/parameter"}]},
                },
                "requestBody": {
                    "oneOf": [
                        REFERENCE,
                        closed(
                            {
                                "description": STRING,
                                "content": {"$ref": "#/$defs/content"},
                                "required": {"type": "boolean"},
                            },
                            ["content"],
                        ),
                    ]
                },
                "responses": {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"pattern": "^([1-5][0-9X]{2}|default|x-.*)$"},
                    "additionalProperties": {"oneOf": [REFERENCE, {"$ref": "#/$defs/response"}]},
                },
                "callbacks": MAP,
                "deprecated": {"type": "boolean"},
                "security": {"type": "array"},
                "servers": {"type": "array"},
            },
            ["responses"],
        ),
    },
    **closed(
        {
            "openapi": {"type": "string", "pattern": "^3\\.1\\.[0-9]+$"},
            "jsonSchemaDialect": STRING,
            "info": closed(
                {
                    "title": STRING,
                    "summary": STRING,
                    "description": STRING,
                    "termsOfService": STRING,
                    "contact": MAP,
                    "license": MAP,
                    "version": STRING,
                },
                ["title", "version"],
            ),
            "servers": {
                "type": "array",
                "items": closed(
                    {
                        "url": STRING,
                        "description": STRING,
                        "variables": {
                            "type": "object",
                            "additionalProperties": closed(
                                {
                                    "enum": {"type": "array"},
                                    "default": STRING,
                                    "description": STRING,
                                },
                                ["default"],
                            ),
                        },
                    },
                    ["url"],
                ),
            },
            "security": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": STRING},
                },
            },
            "paths": {
                "type": "object",
                "propertyNames": {"pattern": "^/"},
                "additionalProperties": closed(
                    {
                        method: {"$ref": "#/$defs/operation"}
                        for method in "get put post delete options head patch trace".split()
                    }
                    | {
                        "summary": STRING,
                        "description": STRING,
                        "parameters": {"type": "array"},
                        "servers": {"type": "array"},
                    }
                ),
            },
            "components": closed(
                {
                    "schemas": {
                        "type": "object",
                        "additionalProperties": {"$ref": "#/$defs/schema"},
                    },
                    "responses": {
                        "type": "object",
                        "additionalProperties": {"$ref": "#/$defs/response"},
                    },
                    "parameters": {
                        "type": "object",
                        "additionalProperties": {"$ref": "#/$defs/parameter"},
                    },
                    "headers": {
                        "type": "object",
                        "additionalProperties": {"$ref": "#/$defs/header"},
                    },
                    "securitySchemes": {
                        "type": "object",
                        "additionalProperties": closed(
                            {
                                "type": {
                                    "enum": [
                                        "apiKey",
                                        "http",
                                        "mutualTLS",
                                        "oauth2",
                                        "openIdConnect",
                                    ]
                                },
                                "description": STRING,
                                "name": STRING,
                                "in": STRING,
                                "scheme": STRING,
                                "bearerFormat": STRING,
                                "flows": MAP,
                                "openIdConnectUrl": STRING,
                            },
                            ["type"],
                        ),
                    },
                }
            ),
            "tags": {"type": "array"},
            "externalDocs": MAP,
            "webhooks": MAP,
        },
        ["openapi", "info"],
    ),
}


def walk(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    yield pointer, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{pointer}/{escape(key)}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{pointer}/{index}")


def schema_pointers() -> list[str]:
    """Every place the document holds a schema (not the schemas nested inside them)."""
    found = [f"/components/schemas/{escape(name)}" for name in DOCUMENT["components"]["schemas"]]
    for pointer, node in walk(DOCUMENT):
        if pointer.startswith("/components/schemas/"):
            continue
        if isinstance(node, dict) and isinstance(node.get("schema"), dict):
            found.append(f"{pointer}/schema")
    return found


def test_the_document_is_an_openapi_3_1_document() -> None:
    Draft202012Validator.check_schema(OPENAPI_SHAPE)
    errors = list(Draft202012Validator(OPENAPI_SHAPE).iter_errors(DOCUMENT))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
    )
    # Its schemas are plain JSON Schema 2020-12, so that meta-schema is the one to check them with.
    assert DOCUMENT["jsonSchemaDialect"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(DOCUMENT["paths"]) == set(OPERATIONS)
    for path, method in OPERATIONS.items():
        assert list(DOCUMENT["paths"][path]) == [method], path
    operation_ids = [DOCUMENT["paths"][p][m]["operationId"] for p, m in OPERATIONS.items()]
    assert len(set(operation_ids)) == len(operation_ids)
    assert DOCUMENT["components"]["securitySchemes"]["bearer"] == {
        **DOCUMENT["components"]["securitySchemes"]["bearer"],
        "type": "http",
        "scheme": "bearer",
    }
    assert DOCUMENT["security"] == [{"bearer": []}]


def test_every_schema_is_valid_json_schema_2020_12() -> None:
    pointers = schema_pointers()
    assert len(pointers) >= 20
    for pointer in pointers:
        try:
            Draft202012Validator.check_schema(at(pointer))
        except Exception as error:  # the pointer is what the message needs
            raise AssertionError(f"{pointer}: {error}") from error


def test_every_reference_resolves_and_every_pattern_is_portable() -> None:
    for pointer, node in walk(DOCUMENT):
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            follow(pointer)  # raises KeyError when the target does not exist
        if pointer.endswith("/pattern") and isinstance(node, str):
            re.compile(node)
            assert "$" not in node[:-1], f"{pointer}: `$` only at the end (see _ecma_pattern)"


def test_the_documents_own_examples_validate() -> None:
    checked = 0
    for pointer, node in walk(DOCUMENT):
        if (
            pointer.startswith("/components/schemas/")
            and isinstance(node, dict)
            and "examples" in node
        ):
            for example in node["examples"]:
                assert_valid(pointer, example, f"the example {example!r}")
                checked += 1
    assert checked >= 10


def test_the_documents_listing_parameters_have_bounds() -> None:
    for path in LISTINGS:
        parameters = [
            follow(f"{operation_pointer(path)}/parameters/{i}")[0]
            for i in range(len(at(f"{operation_pointer(path)}/parameters")))
        ]
        assert [(p["name"], p["in"]) for p in parameters] == [
            ("pageNo", "query"),
            ("pageSize", "query"),
        ]
        for parameter in parameters:
            schema = parameter["schema"]
            assert schema["type"] == "integer" and {"minimum", "maximum", "default"} <= set(schema)
