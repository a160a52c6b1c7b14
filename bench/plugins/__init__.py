"""The pytest layer: options, parametrization, fixtures, recorders and the eval-row plugin."""
