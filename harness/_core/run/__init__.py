"""A run's settings and record: what is asked (`options`, `limits`), where it is written
(`dirs`, `storage`) and what it adds up to (`summary`, `stats`).

Above the data model of `harness._core` (types, protocol, errors), which imports none of it.
"""
