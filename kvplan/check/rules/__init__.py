"""The checks `kvplan check` runs on one deployment, by concern: inputs (targets, model name,
flags read into EngineArgs), model (tensor parallel, max_model_len limit, --hf-overrides),
hardware (GPU, GPU count, utilization target), memory (the planner's Plan)."""
