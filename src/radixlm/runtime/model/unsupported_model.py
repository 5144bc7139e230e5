"""The error every model reader raises for a checkpoint it cannot run faithfully.

Its own module so that the config readers (``model_config.py`` and the family readers it
calls, e.g. ``gemma3_config.py``) can all raise it without importing one another.
"""

from __future__ import annotations


class UnsupportedModelError(ValueError):
    """The folder is not a checkpoint this runtime can load."""
