"""Developer scripts: the local model server, model files and the processes the demo and tests start."""
