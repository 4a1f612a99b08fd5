"""The wire: protobuf <-> domain conversion, vector chunking, blob streams, deadlines."""
