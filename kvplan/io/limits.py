"""Every size cap kvplan puts on its inputs, in one table (bytes are int; counts are items).

An input larger than its cap is refused with one line naming the file or flag (exit 2), never
read whole. The modules that apply a cap import it from here (and keep the name, so tests can
lower it on that module).
"""

from __future__ import annotations

# -- files read by any command (kvplan.io.files) ---------------------------------------------
MAX_FILE_BYTES = 2 * 1024 * 1024  # larger inputs are refused, not read
MAX_YAML_NODES = 100_000  # a YAML document expanding (through aliases) past this is refused

# -- model directories (kvplan.sources.local) ------------------------------------------------
CONFIG_MAX_BYTES = 16 * 1024 * 1024
# Published config.json files nest 5 levels at most (quantization_config.config_groups.group_0.
# weights.num_bits); deeper is a broken or hostile file. Python's json parser itself gives up
# with a RecursionError near 1,000 levels, and anything that walks the dict later would too.
MAX_JSON_DEPTH = 64
# safetensors (safetensors/src/tensor.rs MAX_HEADER_SIZE) refuses headers above 100,000,000 bytes.
SAFETENSORS_MAX_HEADER_BYTES = 100_000_000
# No real tensor comes near this: the largest published ones (embeddings of 100k-250k vocabularies
# x 7-16k hidden, fp32 at worst) are a few GiB, and a whole checkpoint shard is at most tens of GiB.
# A header claiming more (shape [10^12, 10^12]) is broken or hostile and is refused, never sized.
# Local files are also held to their own size (data_offsets inside the file); Hub headers only to
# this bound, since huggingface_hub reads the header alone.
SAFETENSORS_MAX_TENSOR_BYTES = 1 << 40  # 1 TiB

# -- --workload files (kvplan.capacity.workload_input) ---------------------------------------
# Checked against the size before a byte is read (and counted while reading, for pipes and
# devices that have no size), then row by row. 100,000 requests pin a length distribution's
# percentiles far more finely than the block arithmetic needs, and keep the sweep's per-layout
# block count (linear in distinct (prompt, output) pairs) to seconds; 16 MiB leaves ~160 bytes
# per row for the other columns of an exported request log.
MAX_WORKLOAD_BYTES = 16 * 2**20
MAX_WORKLOAD_ROWS = 100_000

# -- vLLM logs (kvplan.verify) ---------------------------------------------------------------
# --from-log and --skip-existing read at most this much: a vLLM start-up log is a few hundred KiB
# even at DEBUG (tests/data/logs/*), and the whole file is held in memory while it is parsed.
MAX_FROM_LOG_BYTES = 64 * 2**20
MAX_LOG_LINES = 4000  # lines of a vLLM child's output kept for the record and the messages

# -- deployment files (kvplan.check) ---------------------------------------------------------
MAX_QUOTE_LINES = 50  # lines a quoted shell string may span

# -- values (not inputs' sizes): larger is a typo or a unit slip -----------------------------
# Byte counts reach torch and CUDA as int64; anything larger is a typo, not a size.
MAX_BYTES = (1 << 63) - 1
# No GPU comes near this (B300: 288 GB); a larger memory_bytes is a typo (1e28) or a unit slip.
MAX_MEMORY_BYTES = 64 << 40  # 64 TiB
# Token counts above this are beyond any model's context (the longest are ~10M tokens); they
# are refused rather than carried through float arithmetic.
MAX_TOKENS = 10**9
