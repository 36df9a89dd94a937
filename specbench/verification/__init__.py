"""What a correct speculative engine or server must do, written once for every front end (check, selftest, gate,
check-lossless): the prompts a verification asks (`first_turns`) and the lossless rule (`lossless`)."""
