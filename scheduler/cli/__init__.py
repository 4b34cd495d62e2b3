"""The command-line surface: ``main`` parses, calls one service method and renders; one module per command group in ``commands/``."""
