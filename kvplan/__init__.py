"""kvplan: predict what vLLM will allocate for the KV cache before you rent the GPU.

The estimate path imports only the standard library, pydantic and PyYAML; rich, typer
and huggingface_hub are imported by the commands that need them.
"""

__version__ = "0.1.0"
