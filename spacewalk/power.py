"""`python -m spacewalk.power`: the smallest difference a split can show (spacewalk/results/power.py)."""

import sys

from spacewalk.results.power import main

if __name__ == "__main__":
    sys.exit(main())
