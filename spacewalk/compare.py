"""`python -m spacewalk.compare`: paired differences of two runs or groups of seeds (spacewalk/results/compare.py)."""

import sys

from spacewalk.results.compare import main

if __name__ == "__main__":
    sys.exit(main())
