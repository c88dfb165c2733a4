"""`python -m spacewalk.report`: tables from run directories (spacewalk/results/report/command.py says how)."""

import sys

from spacewalk.results.report.command import main

if __name__ == "__main__":
    sys.exit(main())
