"""vLLM 0.26.0 rules that only `kvplan check` reads (the flag catalogue itself is in
engines/vllm/serve_flags.py).

Module of the version package engines/vllm/v0_26 (issue 11); kvplan.check.version.check_rules
selects it.
"""

from __future__ import annotations

# Switches whose vLLM 0.26.0 default is on (config/cache.py enable_prefix_caching,
# config/scheduler.py enable_chunked_prefill / async_scheduling=None -> auto, config/load.py
# use_tqdm_on_load, cli_args.py enable_log_deltas / enable_flash_late_interaction): `key: false`
# in a --config file is dropped by vLLM's loader, so it does not turn them off.
DEFAULT_ON_SWITCHES = frozenset(
    {
        "enable-prefix-caching",
        "enable-chunked-prefill",
        "async-scheduling",
        "use-tqdm-on-load",
        "enable-log-deltas",
        "enable-flash-late-interaction",
    }
)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/cache.py', 'CacheConfig.enable_prefix_caching'),
    ('config/scheduler.py', 'SchedulerConfig.enable_chunked_prefill'),
    ('config/scheduler.py', 'SchedulerConfig.async_scheduling'),
    ('config/load.py', 'LoadConfig.use_tqdm_on_load'),
)
