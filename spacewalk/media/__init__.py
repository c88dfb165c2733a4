"""Recordings as pixels and time: one decoder interface over decord and PyAV with frames at timestamps (`video`),
decoding ahead of an encoder in other threads (`frame_prefetch`), the k-second cell grid anchored at t = 0
that says which cells a window covers (`grid`), and frames written as H.264 (`h264`)."""
