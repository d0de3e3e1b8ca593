"""toolshim: an OpenAI-compatible reverse proxy that gives every model tool calling."""

__version__ = "0.1.0"
