"""adstore: read-only (adjunct) stores as Samza's side-input stores, filled from a topic or a file dataset.

``load`` takes one options object and chooses the mode: ``topic`` (bootstrap, resume, follow: a store per
task holding its partitions and their offsets), ``dataset`` (a topic carrying versions of a bounded dataset,
each sealed at its end-of-dataset marker) or ``files`` (a new version of a versioned store from a file
dataset); ``common`` holds what the topic and dataset loads share, ``builds`` the Spark build dirs.
``versions`` lists and switches a versioned store's versions, ``status`` predicts what Samza's next start
does with each store, ``seal`` gives a job that has not started its first checkpoints, ``job`` fills a
load's options from the job's config.
"""
