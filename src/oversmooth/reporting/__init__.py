"""The tables and figures, built from the analyses' files."""
