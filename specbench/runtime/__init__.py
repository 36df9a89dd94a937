"""The layer under `engine` and `spec`: what both import, so neither imports the other."""
