"""The labelled audio clip data sets: builder, version tables (versions/*.tsv), synthesisers, archive unpacking."""
