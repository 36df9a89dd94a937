"""The error every attention debug invariant raises (INV-0, INV-SLOT, INV-FIELDS, INV-REQ: invariants.py; INV-TREE:
tree_mask.py; INV-KIND, INV-SCORE). A leaf, so that the modules that check invariants import it without importing
each other."""


class InvariantViolation(AssertionError):
    pass
