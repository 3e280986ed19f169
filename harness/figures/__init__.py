"""The report's figures, a module per figure or family, each drawing the report's claims: `(data, out)`."""

# Imports nothing: importing figures.cli (every `python -m harness` does, to build its parser) must
# not pull in matplotlib and pandas; `every` lists and draws the figures.
