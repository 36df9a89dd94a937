"""The stress stage: speculation on vs off over a matrix of the conditions speculative bugs need (concurrency, prompt
length, cache state, zero-draft rounds, the widest verify), judged per condition with exact intervals."""
