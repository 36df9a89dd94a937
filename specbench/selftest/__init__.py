"""`specbench selftest`: the check battery against every injected fault on a tiny random model pair."""
