"""kvplan: predict what vLLM will allocate for the KV cache before you rent the GPU.

The estimate path imports only the standard library, pydantic and PyYAML; rich, typer
and huggingface_hub are imported by the commands that need them.
"""

__version__ = "0.1.0"

# The name kvplan is published and installed under (`pip install kvplan-vllm`): "kvplan" on PyPI
# is another project. The command and the import name stay `kvplan`. Hints that tell a user what
# to install use this; pyproject.toml's [project] name is the same (tests/test_packaging.py).
DISTRIBUTION = "kvplan-vllm"
