"""Tables in and out: CSV/Parquet/PostgreSQL readers, encoders, writers, atomic files, progress."""

import os

# Arrow's C++ readers (Parquet decoding among them) allocate from the C++ default memory pool,
# which pyarrow.set_memory_pool does not change (see fedanon.io.columns.use_system_allocator);
# only this variable does, read once when pyarrow is first imported.  Left to mimalloc, reading
# kept about 5 bytes per row read (0.5 GB at 100M rows).  A value set by the user wins.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
