"""The report writers: results tables, report.md and figures of each sweep, the demo's one-screen report, and a
study's report re-rendered from its committed results folder. Imports no command module (``ptsweep.sweeps``).
"""
