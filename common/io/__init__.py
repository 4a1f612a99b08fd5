"""Tables in and out: CSV/Parquet/PostgreSQL readers, encoders, writers, atomic files, progress."""
