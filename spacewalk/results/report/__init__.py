"""python -m spacewalk.report: tables made from run directories (spacewalk/results/report/command.py)."""
