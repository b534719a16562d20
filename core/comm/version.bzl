"""shardkit's version: the one place it is written. build_id.cc (kShardkitVersion, the CLI's
--version) and the Python wheel's name and metadata (integration/python) take it from here."""

SHARDKIT_VERSION = "0.1.0"
