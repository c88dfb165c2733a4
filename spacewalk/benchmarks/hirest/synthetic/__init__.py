"""The synthetic HiREST: a small dataset in the official layout, generated from a seed.

It is what `data=hirest` runs on by default, so every HiREST command works on a fresh machine before any
download. It is a miniature of the release (docs/hirest.md) in the authors' layout:

    data/splits/all_data_{train,val,test}.json          query -> {"<id>.mp4": annotation} (test masked)
    data/splits/all_data_test_negative_samples.json     video-retrieval distractors
    data/evaluation/categories.json                     prompt_to_cat, video_to_cat
    data/evaluation/formatted_moment_evaluation_gt.json test step GT (clippable test videos with steps)
    data/val_testing/all_data_test.json                 the val split again, as the official val scoring wants it
    data/val_testing/formated_moment_evaluation_gt.json val step GT (sic)
    data/videos/<id>.mp4                                where the authors' download script puts the videos
    data/ASR/<id>.srt                                   Whisper-style subtitles (the authors' ASR.zip layout),
                                                        for the split videos only, like the authors' extraction
    synthetic.json                                      how it was generated (it is synthetic data)

Each query is a "how to" task (e.g. "Make a Red Paper Lantern", 20 things x 8 colours, four categories);
no query is in two splits, so test queries are colour/thing combinations no training query has. A task
has its own look (work surface, colours) and a recipe of steps, shared by every task making the same
thing; a video shows a run of consecutive steps. A step is an action on an object ("cut the red paper"):
the object gives the shape, its colour the colour, the action a coarse slowly moving look (bands, a
shadowed half, a stream, a blob of glue, ...), all visible in an 8 x 8 thumbnail, so neighbouring steps
look different and a heading can be read off the picture. Outside the relevant moment a person talks to
the camera in front of a grey wall, the same for every task. The subtitles narrate the steps (announced
a little early, late or not at all, with filler words and asides) inside the moment and chat outside.
Both modalities are informative and both are noisy: camera cuts inside steps and a moving hand fool a
frame-difference (SSIM) segmenter, a thumbnail confuses some actions, and narration misses steps.

Editing (options, off by default: the defaults give the version-1 videos byte for byte). By default every
step starts with a hard cut and at most one close-up cut falls inside a step, which is a frame-difference
segmenter's best case. Real how-to videos are edited differently, and that is what makes SSIM weak on them:
- `shot_seconds=(lo, hi)`: YouTube tutorials are cut into shots of a few seconds (jump cuts that drop
  pauses, closer and wider framings of the same work); each step is filmed as consecutive shots of lo..hi s,
  every one a new zoom and framing of the same object and action (cuts that are not step boundaries);
- `p_continuous_step`: many step changes happen in one take, the hands putting one thing down and picking
  up the next while the camera keeps rolling; such a step starts without a cut: the framing, camera motion
  and hand continue and the old objects cross-fade into the new over 1-3 s centred on the annotated start
  (a boundary without a cut);
- `camera_motion`: a hand-held camera pans; each shot drifts at a speed drawn up to this many frame
  widths per second (frames of one shot keep changing a little).
These draw from a random stream of their own, so switching them on changes the pictures only: the
annotation, the steps shown and the subtitles stay the same. `data=hirest` (conf/data/hirest.yaml) uses
them (`shot_seconds=(2, 6), p_continuous_step=0.5, camera_motion=0.02`) with videos of 40-150 s
(`seconds=(40, 150)`: steps as long as the release's against the joint model's 5 s rule); docs/hirest.md
gives the reasons and both models' scores on that setting and on these defaults.

    python -m spacewalk.benchmarks.hirest.synthetic --root data/synthetic_hirest [--seed N] [--overwrite]

The parts, one idea each: `options` (HiRESTOptions), `vocabulary` (tasks, objects, actions, their looks and
words), `video_plan` (one video's timeline and shots), `narration` (its subtitles), `plan` (the whole
dataset, decided from the options), `render` (pictures and the mp4 writer), `generate` (the files in the
release's layout, checked with the one reader; written on first use by `ensure_hirest`).
"""
