"""A fictitious family for tests/model/test_families.py: FooForCausalLM, the generic decoder except
that every 3rd layer (3rd, 6th, ...) uses sliding-window attention of ``sliding_window`` tokens.
It is the whole of what adding a family takes: this module plus one registry line."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family


class Foo(Family):
    model_types = ("foo",)

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        return ["sliding_attention" if (i + 1) % 3 == 0 else "full_attention" for i in range(n_layers)], "layer_types"


FOO = Foo()
