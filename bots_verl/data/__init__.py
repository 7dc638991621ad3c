"""Data preparation: GURU's per-domain parquet files to verl's RL format (see :mod:`bots_verl.data.guru`)."""
