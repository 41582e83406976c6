"""Where `kvplan check` finds deployments: shell lines, Dockerfiles, compose, Kubernetes, vLLM
--config YAML and kvplan.yaml manifests (one module each)."""
