"""smith.tasks: the reasoning-gym catalog (seen/unseen categories, easy/hard bands), seeded cached
items, and guarded scoring (DESIGN.md section 5)."""

from smith.tasks.catalog import BANDS, GROUPS, Catalog, Category, load_catalog
from smith.tasks.scoring import score
from smith.tasks.store import Item, items

__all__ = ["BANDS", "GROUPS", "Catalog", "Category", "Item", "items", "load_catalog", "score"]
