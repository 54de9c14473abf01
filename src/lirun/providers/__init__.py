"""Agent CLIs as providers: one interface (``base``), one module per CLI, the registry.

Nothing is imported here: `li run` of a command must not load a provider.
"""
