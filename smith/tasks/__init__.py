"""smith.tasks: the reasoning-gym catalog (seen/unseen categories, easy/hard bands), seeded cached
items, and guarded scoring (docs/architecture.md, "reasoning-gym")."""

from smith.tasks.catalog import BANDS, GROUPS, Catalog, Category, load_catalog, score
from smith.tasks.item import Item
from smith.tasks.store import items

__all__ = ["BANDS", "GROUPS", "Catalog", "Category", "Item", "items", "load_catalog", "score"]
