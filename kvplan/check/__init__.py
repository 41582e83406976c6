"""`kvplan check`: read vLLM deployments from config files as they are and report what fails.

The package (issue 11): ``checker`` runs a check (Checker, check_files); ``diagnostics`` holds
the check ids and Diagnostic; ``sources/`` finds deployments (shell, dockerfile, compose, k8s,
vllm_config, manifest, detect, invocation); ``deployment`` reads `vllm serve` arguments;
``rules/`` holds the checks; ``report`` the Report and its formats; ``schema`` `kvplan schema`;
``paths`` the repository boundary.
"""
