"""grammar: a tree node's verify row is masked by its earlier sibling's grammar state (the state after the sibling's
path) instead of its own, as when one matcher is walked across siblings without rolling back to their parent.

Chain rounds and every first child keep their own masks, so only a tree branch that is a later sibling is bent: the
tokens after it are checked, and its bonus sampled, under the grammar of a branch that was not accepted.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import DraftsTrees


class GrammarTreeSiblingState(Mutant):
    fault = Fault("grammar-tree-sibling-state", "a tree node's verify row is masked by its earlier sibling's "
                  "grammar state, not by the state after its own path", "", "grammar", DraftsTrees)

    def grammar_tree_mask_rows(self, parents, bitmask):
        bent = bitmask.clone()
        first = 0
        for request_parents in parents:
            last_child: dict[int, int] = {}  # parent -> its latest child so far
            for node, parent in enumerate(request_parents):
                sibling = last_child.get(parent)
                if sibling is not None:
                    bent[first + 1 + node] = bitmask[first + 1 + sibling]
                last_child[parent] = node
            first += 1 + len(request_parents)
        return bent
