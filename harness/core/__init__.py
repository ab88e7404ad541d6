"""The foundation: errors, validation, atomic files, paths, progress, identity, provenance,
statistics and the stored formats' schemas. It imports nothing else of the project, so every
other layer (models, tasks, training, the pipeline, reports, the CLI) can build on it."""
