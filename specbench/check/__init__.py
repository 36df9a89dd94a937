"""`specbench check`: a battery of losslessness and draft-path checks that ends in a pass/fail table."""
