"""kvplan: predict what vLLM will allocate for the KV cache before you rent the GPU.

The arithmetic imports only the standard library, pydantic and PyYAML; the command line adds
typer, and rich for tables; huggingface_hub is imported only to fetch a model's config from the
Hub. Start-up (kvplan._entry, kvplan.cli) loads a command's module only when it runs.
"""

__version__ = "0.1.0"

# The name kvplan is published and installed under (`pip install kvplan-vllm`): "kvplan" on PyPI
# is another project. The command and the import name stay `kvplan`. Hints that tell a user what
# to install use this; pyproject.toml's [project] name is the same (tests/test_packaging.py).
DISTRIBUTION = "kvplan-vllm"
