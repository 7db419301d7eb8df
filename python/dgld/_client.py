"""dgld._client, the old name of dgld.distributed.dist_context: the same
module object (sys.modules), so its state (the connection, the options) is
one whichever name a script imported it by."""

import sys

from .distributed import dist_context

sys.modules[__name__] = dist_context
