"""pydantic-ai's models, with each tool's schema reworked for the provider once per process, not per call.

Before every request pydantic-ai passes each tool's JSON schema through the provider profile's
transformer (`customize_request_parameters`: a deep copy and a walk of the schema, making it
strict-compatible where it can). The result depends only on the transformer, the schema and the
tool's `strict`, and a ticket's request offers the same tools call after call: on a request of
fifteen tools this was 2-3 ms of every call (docs/benchmarks.md). Here the transformed schema is
kept, keyed by those three; the tool definitions sent are built from it exactly as pydantic-ai
builds them (the same function, on a request holding the one tool). pydantic-ai documents the
method as the one to override; a request asking for structured output (`output_object`) takes
pydantic-ai's own path unchanged.
"""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import replace
from typing import Any

from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

# (transformer, strict, schema as JSON) -> (transformed schema, strict as sent). Bounded: a process
# meets a handful of tool sets; a growing one is emptied rather than kept.
_SCHEMAS: dict[tuple, tuple[dict[str, Any], bool | None]] = {}
_MAX_SCHEMAS = 1024
_lock = threading.Lock()


def _key(transformer, tool: ToolDefinition) -> tuple | None:
    try:
        text = json.dumps(tool.parameters_json_schema, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None  # not JSON: pydantic-ai transforms it as it comes
    return (transformer, tool.strict, text)


class CachedToolSchemas:
    """Mixin for a pydantic-ai model: `customize_request_parameters` with the tools' transformed schemas kept."""

    def customize_request_parameters(self, model_request_parameters: ModelRequestParameters) -> ModelRequestParameters:
        transformer = self.profile.get("json_schema_transformer")
        if transformer is None or model_request_parameters.output_object is not None:
            return super().customize_request_parameters(model_request_parameters)
        return replace(
            model_request_parameters,
            function_tools=[self._customized(transformer, t) for t in model_request_parameters.function_tools],
            output_tools=[self._customized(transformer, t) for t in model_request_parameters.output_tools],
        )

    def _customized(self, transformer, tool: ToolDefinition) -> ToolDefinition:
        key = _key(transformer, tool)
        kept = _SCHEMAS.get(key) if key is not None else None
        if kept is None:
            alone = super().customize_request_parameters(ModelRequestParameters(function_tools=[tool]))
            done = alone.function_tools[0]
            if key is None:
                return done
            kept = (done.parameters_json_schema, done.strict)
            with _lock:
                if len(_SCHEMAS) >= _MAX_SCHEMAS:
                    _SCHEMAS.clear()
                _SCHEMAS[key] = kept
        schema, strict = kept
        return replace(tool, parameters_json_schema=schema, strict=strict)


@functools.cache
def keeping_schemas(model_class: type) -> type:
    """`model_class` (a pydantic-ai model) keeping the tools' reworked schemas: one subclass per class, made
    when first asked for, so only the provider in use is imported (Anthropic's SDK takes 1-2 s to import,
    which a first OpenAI call in a fresh worker process paid when all were imported here)."""
    return type(model_class.__name__, (CachedToolSchemas, model_class), {"__module__": __name__})
