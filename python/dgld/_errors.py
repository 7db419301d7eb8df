"""The exceptions dgld raises. Every error of dgld's C++ library arrives as
one of these, carrying the library's message (which names the file, field,
id or peer concerned). All derive from DGLError, which scripts written for
DGL catch as dgl.DGLError; each also derives from the built-in exception a
Python programmer would expect (ValueError for a bad argument, TimeoutError
for a deadline, ConnectionError for a dead peer, ...)."""


class DGLError(Exception):
    """Any error of dgld."""


class InvalidArgument(DGLError, ValueError):
    """A bad argument or input: an id out of range, a wrong shape or dtype."""


class NotFound(DGLError, LookupError):
    """A named thing does not exist: a file, a tensor, a peer."""


class IOError(DGLError, OSError):  # noqa: A001 - the library's own name for it
    """Reading or writing a file failed."""


class Timeout(DGLError, TimeoutError):
    """A deadline expired: a server, a worker or a peer did not answer in time."""


class Closed(DGLError, ConnectionError):
    """A connection closed or a peer died."""


class ProtocolError(DGLError, ConnectionError):
    """A peer sent bytes that do not follow dgld's protocol."""


class Corruption(DGLError, RuntimeError):
    """Stored data fails its checksum or invariants."""


class AlreadyExists(DGLError, FileExistsError):
    """Something of that name exists already."""


class ResourceExhausted(DGLError, MemoryError):
    """A limit was hit (frame size, memory, connections)."""
