"""Algorithms that know no benchmark: the chain arithmetic of plan decoding (`hmm`: Viterbi, forward-backward) and
TW-FINCH temporally weighted clustering (`tw_finch`, the intra-video retrieval baseline)."""
