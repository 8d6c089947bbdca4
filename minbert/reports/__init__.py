"""report.py's figures and report.md: reading runs (read.py), figures (figures.py), the report and
the results table (report.py)."""
