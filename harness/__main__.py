import sys

from harness.errors import HarnessError, exit_code

try:
    from harness.cli import main
except HarnessError as exc:  # an incomplete registry entry is refused at import (harness/registry.py)
    print(f"ERROR: {exc}", file=sys.stderr)
    raise SystemExit(exit_code(exc)) from None

raise SystemExit(main())
