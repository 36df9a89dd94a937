"""A sweep run's data model, shared by `bench` (which runs sweeps), `backends` (which answer their turns) and
`compare` (which reads finished runs): the sweep config, cell keys, turns, finished turns, result rows and the
parquet schema. A leaf: it imports none of those three packages."""
