"""Generated protobuf/gRPC code. Do not edit: run `python tools/gen_proto.py`."""
