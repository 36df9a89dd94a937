"""Errors a user can cause end in one clear message and a non-zero exit.

Library code raises `SpecbenchError` for such conditions (bad path, mismatched
vocabulary, malformed data, impossible configuration); the CLI catches it,
prints the message and exits with status 2. Anything else is a bug and keeps
its traceback.
"""


class SpecbenchError(Exception):
    """A problem with the user's inputs or configuration, not a bug."""


class Interrupted(Exception):
    """Ctrl-C that stopped work part-way; the message says what was kept and how to go on (exit status 130).

    Not a KeyboardInterrupt: click turns those into a silent exit before the CLI could print this message.
    """


class ServerLaunchFailed(SpecbenchError):
    """A server specbench launched (--server-cmd) never became ready: nothing was measured on it."""
