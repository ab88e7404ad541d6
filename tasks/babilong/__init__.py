"""BABILong (placeholder while being written)."""
