"""Command-line flags: value types (types.py), shared groups (groups.py), the pipeline parsers (parsers.py),
the defaults that are decisions (defaults.py), the rules that refuse flags which would do nothing or clash
(rules.py), and settings.py, the one place that turns parsed flags into the settings the library takes."""
