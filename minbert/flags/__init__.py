"""Command-line flags: the rows of the training scripts' flags (table.py lists them; model_rows.py,
recipe_rows.py, runtime_rows.py hold them), value types (types.py), shared groups (groups.py), the pipeline
parsers (parsers.py), the table of defaults that are decisions, each with its source (defaults.py), the rules
that refuse flags which would do nothing or clash (rules.py), and settings.py, the one place that turns parsed
flags into the settings the library takes."""
