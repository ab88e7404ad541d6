"""Data sources for the tasks (essays, word lists, SQuAD, HotpotQA); each has a content hash."""
