"""The tool pool: admission, eviction, distractors, retrieval, persistence and export."""

from smith.pool.export import menu_names
from smith.pool.pool import (
    POOL_FILE,
    PoolEntry,
    PoolFileError,
    ToolPool,
    checkpoints,
    function_schema,
    resolve_pool_path,
)

__all__ = ["POOL_FILE", "PoolEntry", "PoolFileError", "ToolPool", "checkpoints", "function_schema", "menu_names",
           "resolve_pool_path"]
