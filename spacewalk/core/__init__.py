"""What every other part of the library stands on: the user's errors (`errors`: DataError names a file, ConfigError
a value) and how a command ends on them (`command_errors`: one `error:` line, exit 2), validated JSON fields
(`fields`), files and folders written whole or not at all (`io`), "5min" as seconds (`durations`) and the parsed
`modalities` value (video, text or both)."""
