"""Models from the Hugging Face Hub: config.json, and parameter counts from safetensors headers.

Everything goes through huggingface_hub (>= 2.4; imported here only, and only when a Hub model is
asked for): its endpoint (HF_ENDPOINT), token (HF_TOKEN / ``hf auth login``), cache (HF_HOME /
HF_HUB_CACHE) and offline mode (HF_HUB_OFFLINE). kvplan does no HTTP, caching or token handling
of its own.

Environment: huggingface_hub reads HF_ENDPOINT, HF_HUB_OFFLINE, the cache paths and the
timeouts into ``huggingface_hub.constants`` once, when it is first imported. kvplan imports it
lazily, at the first Hub lookup, so for the CLI the environment of the process is what counts;
this module reads those settings from ``huggingface_hub.constants`` (the library's own view) and
never from ``os.environ`` directly, so kvplan and the library cannot disagree. Code that changes
the environment after the import (tests) must resync the constants: see tests/hf_server.py.

Bounded waiting (huggingface_hub 2.4.0, file_download.py): when its first HEAD fails with a
network error, a timeout, 429 or 5xx and nothing is cached, ``hf_hub_download`` retries with a
60 s timeout and exponential backoff (5 retries, 1+2+4+8+8 s of sleep), i.e. minutes. To fail in
one timeout instead, ``load_from_hub`` first makes one HEAD with ``get_hf_file_metadata`` (no
retries, ``HF_HUB_ETAG_TIMEOUT`` seconds, default 10) and only calls ``hf_hub_download`` once
the Hub has answered. When that HEAD cannot reach the Hub, the cached config.json (if any) is
used, as ``hf_hub_download`` itself would; otherwise a one-line KvplanError says what happened
and how long kvplan waited.
"""

from __future__ import annotations

import time
from pathlib import Path

from kvplan.errors import EnvironmentMissing, KvplanError
from kvplan.sources.base import ModelSource
from kvplan.sources.local import (
    HF_QUANT_CONFIG_NAME,
    coverage_gap,
    incomplete_note,
    num_text_layers,
    params_vllm_loads,
    read_config,
    read_json,
    tensor_sizes,
    ties_word_embeddings,
)

CONFIG_NAME = "config.json"

_FALLBACK_HINT = "or use a bundled model id or a local directory holding config.json"


def load_from_hub(repo_id: str, revision: str | None = None) -> ModelSource:
    """Fetch ``repo_id``'s config.json (and safetensors header facts) from the Hugging Face Hub.

    Args:
        repo_id: "owner/name" on the Hub (HF_ENDPOINT).
        revision: branch, tag or commit hash; None means the default branch ("main").
    Returns:
        ModelSource with origin "hub"; ``revision`` is the resolved commit hash (None only when
        the cache cannot tell it); ``checkpoint_params`` is parameters (elements) by safetensors
        dtype and ``checkpoint_bytes`` their total bytes (from the headers' data offsets), over
        the tensors vLLM loads (see kvplan.sources.local.params_vllm_loads); both None
        when the headers cannot be read or do not cover the model (kvplan.sources.local.
        coverage_gap), with the reason in ``provenance["weights_note"]`` (and in ``notes`` when
        headers were found but are malformed or incomplete). ``tensors_visible``: True when the
        repo has safetensors, False when it has none, None when they could not be looked at.
    Raises:
        KvplanError (exit 2, one line + hint): gated repo without access (401/403), repo not
        found (404), revision not found, no config.json in the repo, Hub unreachable / timed out /
        5xx / 429 with nothing cached, offline (HF_HUB_OFFLINE) with nothing cached, unreadable
        config.json, invalid repo id, cache not writable. EnvironmentMissing (exit 3) when
        huggingface_hub cannot be imported.

    Rule sources: huggingface_hub 2.4.0 file_download.py (hf_hub_download, get_hf_file_metadata,
    the retry path in _hf_hub_download_to_cache_dir) and hf_api.py (get_safetensors_metadata,
    resolve_revision).
    """
    _import_hub()
    import httpx2
    from huggingface_hub import HfApi, constants, get_hf_file_metadata, hf_hub_download, hf_hub_url, is_offline_mode
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, OfflineModeIsEnabled

    endpoint = constants.ENDPOINT
    requested = revision or constants.DEFAULT_REVISION
    timeout = constants.HF_HUB_ETAG_TIMEOUT  # seconds; HF_HUB_ETAG_TIMEOUT, default 10
    provenance: dict = {"repo_id": repo_id, "endpoint": endpoint, "requested_revision": requested}
    api = HfApi(endpoint=endpoint)
    from_cache = is_offline_mode()  # config.json from the cache only; no safetensors headers then

    if from_cache:
        path = _cached_config(repo_id, revision)
        if path is None:
            raise KvplanError(
                f"{repo_id}: HF_HUB_OFFLINE is set and {CONFIG_NAME} (revision {requested}) is not in the "
                f"Hugging Face cache ({constants.HF_HUB_CACHE})",
                hint=f"run once online to cache it, or unset HF_HUB_OFFLINE, {_FALLBACK_HINT}",
            )
        provenance["cache_note"] = "HF_HUB_OFFLINE is set: config.json read from the local cache"
    else:
        started = time.monotonic()
        try:
            # One HEAD, no retries, bounded by `timeout`: fail fast instead of entering
            # hf_hub_download's long retry path (see the module docstring).
            url = hf_hub_url(repo_id, CONFIG_NAME, revision=revision, endpoint=endpoint)
            get_hf_file_metadata(url, timeout=timeout, retry_on_errors=False)
            path = hf_hub_download(repo_id, CONFIG_NAME, revision=revision, endpoint=endpoint, etag_timeout=timeout)
        except (HFValidationError, OfflineModeIsEnabled, httpx2.HTTPError, OSError) as exc:
            # (HfHubHTTPError, FileMetadataError and LocalEntryNotFoundError are OSErrors.)
            err = exc
            if isinstance(exc, LocalEntryNotFoundError) and isinstance(exc.__cause__, Exception):
                err = exc.__cause__  # hf_hub_download's own HEAD failed after ours had succeeded
            elapsed = time.monotonic() - started
            path = _cached_config(repo_id, revision) if _hub_unreachable(err) else None
            if path is None:
                raise _explain(err, repo_id, requested, endpoint, timeout, elapsed) from None
            from_cache = True
            provenance["cache_note"] = (
                f"the Hub could not be reached ({_short_reason(err, timeout)}): config.json read from the local cache"
            )

    commit = _resolved_commit(api, repo_id, revision)
    provenance["commit"] = commit
    provenance["config_path"] = str(path)
    config = read_config(Path(path))
    if not config.get("quantization_config"):
        quant = _modelopt_quant_config(repo_id, commit or revision, endpoint, timeout, from_cache, provenance)
        if quant is not None:
            config = {**config, "_hf_quant_config": quant}

    notes: tuple[str, ...] = ()
    if from_cache:
        params = total = visible = None
        provenance["weights_note"] = (
            "safetensors headers are not cached: weights from kvplan's formula (config.json); "
            "run online for the checkpoint's own figures"
        )
        provenance["tensors"] = "not looked at (config.json from the cache)"
    else:
        params, total, note, visible, notes = _checkpoint_params(api, repo_id, commit or revision, config)
        provenance["weights_from" if params is not None else "weights_note"] = note
        provenance["tensors"] = {True: "the repo's safetensors headers", False: "none: the repo has no safetensors"}.get(
            visible, "not looked at (the headers could not be fetched)"
        )

    return ModelSource(
        name=repo_id,
        config=config,
        origin="hub",
        revision=commit,
        checkpoint_params=params,
        checkpoint_bytes=total,
        provenance=provenance,
        tensors_visible=visible,
        notes=notes,
    )


# ---------------------------------------------------------------------------------------------


def _import_hub() -> None:
    """Import huggingface_hub (>= 2.4: it raises httpx2 errors and has RemoteEntryNotFoundError).

    Raises:
        EnvironmentMissing (exit 3): not installed, or too old.
        KvplanError (exit 2): huggingface_hub rejected an HF_* variable while importing.
    """
    try:
        import huggingface_hub
        import huggingface_hub.constants  # noqa: F401  (reads HF_* now; huggingface_hub imports lazily)
    except ImportError as exc:
        raise EnvironmentMissing(
            f"the Hugging Face Hub source needs huggingface_hub >= 2.4 ({exc})",
            hint="pip install 'huggingface_hub>=2.4', " + _FALLBACK_HINT,
        ) from None
    except ValueError as exc:  # e.g. HF_HUB_ETAG_TIMEOUT=abc fails inside huggingface_hub.constants
        raise KvplanError(
            f"huggingface_hub refused an HF_* environment variable: {exc}",
            hint="HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT take whole seconds",
        ) from None
    try:
        import httpx2  # noqa: F401
        from huggingface_hub.errors import RemoteEntryNotFoundError, RevisionResolutionError  # noqa: F401
    except ImportError as exc:
        raise EnvironmentMissing(
            f"the Hugging Face Hub source needs huggingface_hub >= 2.4, found {huggingface_hub.__version__} ({exc})",
            hint="pip install -U 'huggingface_hub>=2.4', " + _FALLBACK_HINT,
        ) from None


def _modelopt_quant_config(
    repo_id: str, revision: str | None, endpoint: str, timeout: float, from_cache: bool, provenance: dict
) -> dict | None:
    """The repo's hf_quant_config.json (NVIDIA ModelOpt checkpoints keep their quantization there,
    not in config.json; vLLM reads it next to config.json, and its kv_cache_quant_algo makes
    `--kv-cache-dtype auto` store fp8), or None when the repo has none.

    From the cache only when config.json came from the cache. A 404 is the normal answer for a
    repo without one; any other failure is recorded in ``provenance`` and treated as absent.
    Raises:
        KvplanError: the file exists but is not a JSON object (read as config.json is).
    """
    import httpx2
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        if from_cache:
            path = hf_hub_download(repo_id, HF_QUANT_CONFIG_NAME, revision=revision, local_files_only=True)
        else:
            path = hf_hub_download(
                repo_id, HF_QUANT_CONFIG_NAME, revision=revision, endpoint=endpoint, etag_timeout=timeout
            )
    except (EntryNotFoundError, LocalEntryNotFoundError):
        return None
    except (httpx2.HTTPError, OSError, ValueError) as exc:
        provenance["hf_quant_config_note"] = f"{HF_QUANT_CONFIG_NAME} could not be checked ({_first_line(exc)})"
        return None
    quant = read_json(Path(path))
    if not isinstance(quant, dict):
        raise KvplanError(f"{repo_id}: {HF_QUANT_CONFIG_NAME} must hold a JSON object")
    provenance["hf_quant_config"] = str(path)
    return quant


def _cached_config(repo_id: str, revision: str | None) -> str | None:
    """The cached config.json for this revision (hf_hub_download with local_files_only=True), or None."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return hf_hub_download(repo_id, CONFIG_NAME, revision=revision, local_files_only=True)
    except LocalEntryNotFoundError:
        return None
    except HFValidationError as exc:
        raise KvplanError(f"{repo_id!r}: not a valid Hub repo id ({_first_line(exc)})", hint=f"use owner/name, {_FALLBACK_HINT}") from None


def _resolved_commit(api, repo_id: str, revision: str | None) -> str | None:
    """The commit hash of ``revision`` as hf_hub_download recorded it in the cache (refs/<revision>);
    HfApi.resolve_revision with local_files_only=True, so no request is made."""
    from huggingface_hub.errors import RevisionResolutionError

    try:
        return str(api.resolve_revision(repo_id, revision=revision, local_files_only=True).resolved)
    except (RevisionResolutionError, OSError):
        return None


def _checkpoint_params(api, repo_id: str, revision: str | None, config: dict):
    """(parameters by dtype, total bytes, note, tensors visible, notes) from the repo's safetensors
    headers; params/total None with the reason in ``note`` when they cannot be used. Never raises
    for Hub or header problems: the estimate then uses kvplan's weight formula. Malformed or
    incomplete headers (the repo has them, but they do not describe the model) also give a
    one-line ``notes`` entry for the plan's warnings. Rule source: huggingface_hub 2.4.0
    HfApi.get_safetensors_metadata; the checks are kvplan.sources.local.tensor_entry and
    coverage_gap."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import NotASafetensorsRepoError, OfflineModeIsEnabled, SafetensorsParsingError

    fallback = "weights from kvplan's formula (config.json)"

    def malformed(why: str):
        return None, None, f"{why}: {fallback}", True, (incomplete_note(repo_id, why),)

    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT)
    except NotASafetensorsRepoError:
        return None, None, f"no model.safetensors or model.safetensors.index.json in the repo: {fallback}", False, ()
    except SafetensorsParsingError as exc:
        return malformed(f"unreadable safetensors header ({_first_line(exc)})")
    except RecursionError:
        return malformed("unreadable safetensors header (JSON nested too deeply)")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # A malformed model.safetensors.index.json or header that huggingface_hub trips over.
        return malformed(f"unreadable safetensors metadata ({type(exc).__name__}: {_first_line(exc)})")
    except (httpx2.HTTPError, OfflineModeIsEnabled, OSError) as exc:
        # HfHubHTTPError and LocalEntryNotFoundError are OSErrors.
        return None, None, f"could not read the safetensors headers ({type(exc).__name__}: {_first_line(exc)}): {fallback}", None, ()
    tensors: dict[str, tuple[str, int, int]] = {}
    try:
        for file_meta in meta.files_metadata.values():
            tensors.update(tensor_sizes(file_meta))
    except ValueError as exc:
        return malformed(f"unreadable safetensors header ({exc})")
    if not tensors:
        return None, None, f"the safetensors files hold no tensors: {fallback}", False, ()
    n_layers = num_text_layers(config)
    why = coverage_gap(tensors, n_layers, meta.weight_map if meta.sharded else None)
    if why:
        return malformed(why)
    params, total = params_vllm_loads(tensors, n_layers, tie_word_embeddings=ties_word_embeddings(config))
    n_files = len(meta.files_metadata)
    return params, total, f"safetensors headers ({n_files} file{'s' if n_files != 1 else ''})", True, ()


def _sent_token(err: BaseException) -> bool:
    """Whether the request that failed carried an Authorization header."""
    try:
        return "authorization" in err.response.request.headers
    except (AttributeError, RuntimeError):  # httpx2 raises RuntimeError for an unset .request
        return False


def _status(err: BaseException) -> int | None:
    return getattr(getattr(err, "response", None), "status_code", None)


def _hub_unreachable(err: BaseException) -> bool:
    """Network down, timeout, offline, or the Hub unhealthy (5xx, 429): a cached copy may serve.

    A definite answer (401/403/404, gated, no such revision or file) is never papered over by
    the cache."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(err, (httpx2.TransportError, OfflineModeIsEnabled)):
        return True
    status = _status(err)
    return isinstance(err, HfHubHTTPError) and status is not None and (status >= 500 or status == 429)


def _short_reason(err: BaseException, timeout: float) -> str:
    import httpx2
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(err, httpx2.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(err, httpx2.ConnectError):
        return f"cannot connect: {_first_line(err) or 'connection refused'}"
    if isinstance(err, OfflineModeIsEnabled):
        return "offline mode is enabled"
    if isinstance(err, httpx2.TransportError):
        return f"{type(err).__name__}: {_first_line(err)}"
    status = _status(err)
    return f"HTTP {status}" if status else _first_line(err)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else ""


def _explain(err: BaseException, repo_id: str, revision: str, endpoint: str, timeout: float, elapsed: float) -> KvplanError:
    """One KvplanError (message + hint saying what to do) for a failed lookup of config.json."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        FileMetadataError,
        GatedRepoError,
        HFValidationError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    page = f"{endpoint}/{repo_id}"
    waited = f"gave up after {elapsed:.1f} s, no retries"
    status = _status(err)
    if isinstance(err, HFValidationError):
        return KvplanError(f"{repo_id!r}: not a valid Hub repo id ({_first_line(err)})", hint=f"use owner/name, {_FALLBACK_HINT}")
    if isinstance(err, GatedRepoError):  # before RepositoryNotFoundError, its base class
        if _sent_token(err):
            return KvplanError(
                f"{repo_id}: gated model, and the token sent has no access to it (HTTP {status})",
                hint=f"accept the license at {page} with the account of your token (approval can take a while), "
                "or set HF_TOKEN to a token of an account that has access",
            )
        return KvplanError(
            f"{repo_id}: gated model, and no Hugging Face token was sent (HTTP {status})",
            hint=f"accept the license at {page}, then set HF_TOKEN or run `hf auth login`",
        )
    if isinstance(err, RepositoryNotFoundError):
        return KvplanError(
            f"{repo_id}: no such model on the Hub at {endpoint} (HTTP {status}), or it is private and no token with access was sent",
            hint=f"check the repo id (owner/name); for a private repo set HF_TOKEN or run `hf auth login`; {_FALLBACK_HINT}",
        )
    if isinstance(err, RevisionNotFoundError):
        return KvplanError(
            f"{repo_id}: revision {revision!r} not found (HTTP {status})",
            hint=f"--revision takes a branch, tag or commit hash of the repo (see {page}/tree/main)",
        )
    if isinstance(err, RemoteEntryNotFoundError):
        return KvplanError(
            f"{repo_id}: no {CONFIG_NAME} at revision {revision!r} (HTTP {status})",
            hint="kvplan needs a Transformers-style config.json: use a bundled model id or a local directory holding one",
        )
    if isinstance(err, OfflineModeIsEnabled):
        return KvplanError(
            f"{repo_id}: huggingface_hub is in offline mode and {CONFIG_NAME} (revision {revision}) is not cached",
            hint=f"run once online to cache it, or unset HF_HUB_OFFLINE, {_FALLBACK_HINT}",
        )
    if isinstance(err, httpx2.TimeoutException):
        return KvplanError(
            f"{repo_id}: the Hub at {endpoint} did not answer within {timeout:g} s ({waited}) and nothing is cached",
            hint=f"check the network and HF_ENDPOINT; on a slow link raise HF_HUB_ETAG_TIMEOUT (seconds), {_FALLBACK_HINT}",
        )
    if isinstance(err, httpx2.TransportError):
        return KvplanError(
            f"{repo_id}: cannot reach the Hub at {endpoint} ({_short_reason(err, timeout)}; {waited}) and nothing is cached",
            hint=f"check the network, proxy settings and HF_ENDPOINT, {_FALLBACK_HINT}",
        )
    if isinstance(err, HfHubHTTPError):
        if status is not None and status >= 500:
            return KvplanError(
                f"{repo_id}: the Hub at {endpoint} answered HTTP {status} (server error; {waited}) and nothing is cached",
                hint=f"the Hub may be down (https://status.huggingface.co): try again later, {_FALLBACK_HINT}",
            )
        if status == 429:
            return KvplanError(
                f"{repo_id}: the Hub at {endpoint} is rate-limiting requests (HTTP 429; {waited}) and nothing is cached",
                hint="wait a minute and retry; requests with a token (HF_TOKEN) get a higher limit",
            )
        if status in (401, 403):
            return KvplanError(
                f"{repo_id}: the Hub refused access (HTTP {status}: {err.server_message or 'unauthorized'})",
                hint=f"check HF_TOKEN or run `hf auth login`; accept the model's license at {page} if it is gated",
            )
        return KvplanError(
            f"{repo_id}: the Hub at {endpoint} answered HTTP {status} for {CONFIG_NAME}",
            hint=f"check HF_ENDPOINT and the repo id, {_FALLBACK_HINT}",
        )
    if isinstance(err, FileMetadataError):
        return KvplanError(
            f"{repo_id}: {endpoint} does not answer like a Hugging Face Hub (no X-Repo-Commit or ETag header)",
            hint="check HF_ENDPOINT and any proxy or firewall between you and the Hub",
        )
    if isinstance(err, LocalEntryNotFoundError):
        return KvplanError(
            f"{repo_id}: could not download {CONFIG_NAME} and it is not cached ({_first_line(err)})",
            hint=f"check the network and HF_ENDPOINT, {_FALLBACK_HINT}",
        )
    if isinstance(err, OSError):
        return KvplanError(
            f"{repo_id}: could not store {CONFIG_NAME} in the Hugging Face cache at {constants.HF_HUB_CACHE} "
            f"({err.strerror or _first_line(err)})",
            hint="set HF_HOME or HF_HUB_CACHE to a writable directory with free space",
        )
    return KvplanError(f"{repo_id}: Hub lookup failed ({type(err).__name__}: {_first_line(err)})", hint=_FALLBACK_HINT)
