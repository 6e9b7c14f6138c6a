"""The advisor's only I/O: model configs from directories, the HF cache or an HF endpoint."""
