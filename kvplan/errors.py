"""The one exception type for user-facing failures, and kvplan's exit codes.

Exit codes (shared by every command):
  0  checked, and it fits / passes
  1  checked, and it does not fit / a check failed / vLLM refused the config
  2  bad input (a flag, a file, a key); nothing was written
  3  environment missing (no GPU, vLLM not installed, wrong vLLM version)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3


class KvplanError(Exception):
    """A failure the user can fix, printed as one line (plus an optional hint), never a traceback.

    Args:
        message: one line naming the offending flag, key or file.
        hint: optional one-line suggestion of what to do.
        exit_code: 2 for bad input (default), 3 for a missing environment, 1 for "does not fit".
    """

    def __init__(self, message: str, hint: str | None = None, exit_code: int = EXIT_BAD_INPUT):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class VllmRefuses(KvplanError):
    """The chosen vLLM version itself refuses the model (it no longer serves the architecture, or
    fails while reading its config): bad input for ``estimate`` (exit 2: another --vllm-version),
    a finding for ``check`` (the deployment as written does not start)."""


class EnvironmentMissing(KvplanError):
    """No GPU, no vLLM, or the wrong vLLM version: exit code 3."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message, hint, exit_code=EXIT_ENVIRONMENT)
