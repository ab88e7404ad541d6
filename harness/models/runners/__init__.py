"""Model runners: one small interface (see base.py), one module per backend, chosen by name."""
