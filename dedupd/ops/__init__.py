"""Operator tools: rebuild, stats, reading alerts and dead letters, pushing documents."""
