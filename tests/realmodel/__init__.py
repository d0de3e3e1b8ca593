"""End-to-end tests against a real local model (llama.cpp server); marked ``realmodel``."""
