"""The layer under `engine` and `speculation`: what both import, so neither imports the other."""
