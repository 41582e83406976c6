"""kvplan's boundary with the outside: guarded file reads and atomic writes (files.py), byte
sizes as people write them (units.py), the size caps on every input (limits.py)."""
