"""The consumer daemon: the input stream, the planner, a batch's stages and outputs, monitoring."""
