"""The OpenAPI 3.1 description of kvplan's web API (served at /api/v1/openapi.json).

Request bodies are described from the commands' own parameters (kvplan.cli.web.api.parameters,
so a flag added to a command appears here); the estimate and perf answers are the JSON Schemas
`kvplan schema` and kvplan.render.schema publish (their ``$defs`` moved under
``components/schemas`` with a prefix so every ``$ref`` resolves inside this one document).
"""

from __future__ import annotations

from kvplan import __version__
from kvplan.cli.web import api

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "the CLI's one-line message"},
        "hint": {"type": ["string", "null"]},
        "exit_code": {"type": ["integer", "null"], "description": "the CLI's exit code (2 bad input, 3 environment)"},
    },
}


def _lift(schema: dict, prefix: str, components: dict) -> dict:
    """``schema`` with its $defs moved into ``components`` as PREFIX_NAME and refs rewritten."""
    defs = schema.pop("$defs", {})
    schema.pop("$schema", None)

    def fix(node):
        if isinstance(node, dict):
            out = {k: fix(v) for k, v in node.items()}
            ref = out.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                out["$ref"] = f"#/components/schemas/{prefix}_{ref[len('#/$defs/'):]}"
            return out
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    for name, sub in defs.items():
        components[f"{prefix}_{name}"] = fix(sub)
    return fix(schema)


def request_schema(name: str) -> dict:
    """The JSON Schema of `kvplan NAME`'s request body: one property per parameter."""
    props, required = {}, []
    for key, p in api.parameters(name).items():
        base = api.json_type(p)
        prop = {"type": [base, "null"]}
        if getattr(p, "multiple", False) or getattr(p, "nargs", 1) == -1:
            prop = {"type": ["array", "null"], "items": {"type": base}}
        flag = None if p.param_type_name == "argument" else next((o for o in p.opts if o.startswith("--")), p.opts[0])
        prop["description"] = (f"{flag}: " if flag else "") + (getattr(p, "help", None) or key)
        if p.required:
            required.append(key)
        props[key] = prop
    schema = {"type": "object", "additionalProperties": False, "properties": props}
    if required:
        schema["required"] = required
    return schema


def openapi_document() -> dict:
    """The OpenAPI 3.1 document (JSON-serialisable)."""
    from kvplan.render.perf_schema import perf_json_schema
    from kvplan.render.schema import estimate_json_schema

    components: dict = {"Error": _ERROR}
    components["Estimate"] = _lift(estimate_json_schema(), "Estimate", components)
    components["Perf"] = _lift(perf_json_schema(), "Perf", components)
    components["Plan"] = {"type": "object", "description": "the `kvplan plan --format json` document"}
    components["Check"] = {"type": "object", "description": "the `kvplan check --format json` document"}
    for name in api.FORMATS:
        components[f"{name.capitalize()}Request"] = request_schema(name)
    check_req = components["CheckRequest"]
    check_req["properties"] = {
        "name": {"type": "string", "description": "the file's base name (deploy.yaml, serve.sh, Dockerfile): how it is read"},
        "content": {"type": "string", "description": "the file's text"},
        **check_req["properties"],
    }
    check_req["required"] = ["name", "content"]

    def ref(n):
        return {"$ref": f"#/components/schemas/{n}"}

    errors = {
        "400": {"description": "bad input: the CLI's one-line message (exit 2)", "content": {"application/json": {"schema": ref("Error")}}},
        "422": {"description": "check only: a posted file it could not read or resolve (its report, exit 2)",
                "content": {"application/json": {"schema": ref("Check")}}},
        "413": {"description": "body over 1 MiB", "content": {"application/json": {"schema": ref("Error")}}},
    }
    slow = {
        "503": {"description": "busy, or a missing environment (exit 3)", "content": {"application/json": {"schema": ref("Error")}}},
        "504": {"description": "ran over the server's --timeout and was stopped", "content": {"application/json": {"schema": ref("Error")}}},
    }

    def post(name: str, answer: str, summary: str, extra_ok: dict | None = None, slow_ok: bool = True) -> dict:
        content = {"application/json": {"schema": ref(answer)}} | (extra_ok or {})
        return {"post": {
            "summary": summary,
            "operationId": name,
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref(f"{name.capitalize()}Request")}}},
            "responses": {
                "200": {"description": "the CLI's document; header X-Kvplan-Exit-Code: 0 it fits/passes, 1 it does not",
                        "content": content},
                **errors, **(slow if slow_ok else {}),
            },
        }}

    def get(summary: str, schema: dict) -> dict:
        return {"get": {"summary": summary, "responses": {"200": {"description": summary, "content": {"application/json": {"schema": schema}}}}}}

    estimate = post(
        "estimate", "Estimate",
        "`kvplan estimate` (query format=json, yaml for the `vllm serve --config` file, serve for the serve line)",
        extra_ok={"application/yaml": {"schema": {"type": "string"}}, "text/plain": {"schema": {"type": "string"}}},
    )
    estimate["post"]["parameters"] = [{"name": "format", "in": "query", "required": False,
                                       "schema": {"enum": list(api.FORMATS["estimate"]), "default": "json"}}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "kvplan web API", "version": __version__,
                 "description": "The documents `kvplan ... --format json` prints, over HTTP. Request keys are the "
                                "commands' parameter names (vLLM's names for engine arguments)."},
        "paths": {
            "/api/v1/estimate": estimate,
            "/api/v1/plan": post("plan", "Plan", "`kvplan plan`: the cheapest setups that fit"),
            "/api/v1/perf": post("perf", "Perf", "`kvplan perf`: throughput, latency and saturation"),
            "/api/v1/check": post("check", "Check", "`kvplan check` on one posted deployment file"),
            "/api/v1/gpus": get("`kvplan gpus --format json`", {"type": "array", "items": {"type": "object"}}),
            "/api/v1/models": get("the bundled model ids", {"type": "object"}),
            "/api/v1/options": get("each command's keys, the vLLM versions and dtypes", {"type": "object"}),
        },
        "components": {"schemas": components},
    }
