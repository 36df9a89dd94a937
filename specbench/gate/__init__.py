"""`specbench gate`: one CI command over a speculative engine or server, stages with stated tolerances, one exit
code, one report (markdown + JUnit XML). Library entry: `runner.run_gate`."""
