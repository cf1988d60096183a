"""mg.profile, the ledger (ledger.py)."""
from .ledger import CATEGORIES, PHASES, TIMED_PHASES, format_bytes, format_flops, format_seconds, profile
