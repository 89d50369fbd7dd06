"""Per-backend printers: IR values and SymPy expressions -> Python source."""
