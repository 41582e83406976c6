"""Moved to kvplan.verify.child (issue 11); this alias goes when every importer is updated.

``python -m kvplan.vllm_child '<json>'`` (as older notes say) still runs the child; kvplan
verify itself starts ``python -m kvplan.verify.child``.
"""
import sys

if __name__ == "__main__":
    from kvplan.verify.child import main

    main()
else:
    from kvplan.verify import child as _moved

    sys.modules[__name__] = _moved
