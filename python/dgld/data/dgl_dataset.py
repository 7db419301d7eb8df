"""DGL's dataset base classes (dgl.data.DGLDataset, DGLBuiltinDataset),
without downloading.

DGLDataset keeps DGL's contract for subclasses: the constructor calls
has_cache() / load(), or else download() when raw_path does not exist,
then process() and save(); a subclass overrides those it needs, and
__getitem__ / __len__. Paths are DGL's: raw_dir (argument, else
DGL_DOWNLOAD_DIR, else ~/.dgl), raw_path = raw_dir/<name>[_<url hash>],
save_dir defaults to raw_dir.

dgld downloads nothing: DGLBuiltinDataset.download() raises
DatasetNotFound (a DGLError and a FileNotFoundError) naming the path
searched and the URL DGL would fetch, so that a copy can be put there."""

import abc
import hashlib
import os

from .._errors import DGLError
from .utils import get_download_dir

__all__ = ["DGLDataset", "DGLBuiltinDataset", "DatasetNotFound"]


class DatasetNotFound(DGLError, FileNotFoundError):
    """No local copy of a dataset where DGL keeps its downloads."""


class DGLDataset(abc.ABC):
    """DGL's abstract dataset: see the module doc for the loading flow.

    Parameters are DGL's: name, url (where DGL would download from; it
    only names the raw folder here), raw_dir, save_dir, hash_key (a tuple
    hashed into `hash`), force_reload (skip the cache), verbose, transform
    (applied by the subclass's __getitem__)."""

    def __init__(self, name, url=None, raw_dir=None, save_dir=None, hash_key=(), force_reload=False, verbose=False,
                 transform=None):
        self._name = name
        self._url = url
        self._force_reload = force_reload
        self._verbose = verbose
        self._hash_key = hash_key
        self._hash = hashlib.sha1(str(hash_key).encode("utf-8")).hexdigest()[:8]
        self._transform = transform
        self._raw_dir = get_download_dir() if raw_dir is None else raw_dir
        self._save_dir = self._raw_dir if save_dir is None else save_dir
        self._load()

    # What a subclass provides.

    def download(self):
        """Fetch the raw data into raw_path (nothing by default)."""

    def save(self):
        """Save the processed data under save_path (nothing by default)."""

    def load(self):
        """Load the processed data saved by save() (nothing by default)."""

    @abc.abstractmethod
    def process(self):
        """Build the dataset from the raw files under raw_path."""

    def has_cache(self):
        """Whether save() left data that load() can read (False by default)."""
        return False

    @abc.abstractmethod
    def __getitem__(self, idx):
        """The idx-th example."""

    @abc.abstractmethod
    def __len__(self):
        """The number of examples."""

    # The flow.

    def _download(self):
        if not os.path.exists(self.raw_path):
            self.download()

    def _load(self):
        if not self._force_reload and self.has_cache():
            try:
                self.load()
                if self.verbose:
                    print("Done loading data from cached files.")
                return
            except KeyboardInterrupt:
                raise
            except Exception as e:  # DGL falls back to processing the raw files
                if self.verbose:
                    print(f"Loading from cache failed ({e}), re-processing.")
        self._download()
        self.process()
        self.save()

    def _url_suffix(self):
        if self._url is None:
            return ""
        return "_" + hashlib.sha1(str(self._url).encode("utf-8")).hexdigest()[:8]

    @property
    def url(self):
        return self._url

    @property
    def name(self):
        return self._name

    @property
    def raw_dir(self):
        return self._raw_dir

    @property
    def raw_path(self):
        """raw_dir/<name>, with "_<first 8 hex digits of sha1(url)>" after
        the name when there is a url (DGL's layout)."""
        return os.path.join(self.raw_dir, self.name + self._url_suffix())

    @property
    def save_dir(self):
        return self._save_dir

    @property
    def save_path(self):
        return os.path.join(self.save_dir, self.name + self._url_suffix())

    @property
    def verbose(self):
        return self._verbose

    @property
    def hash(self):
        return self._hash

    def __repr__(self):
        return f'Dataset("{self.name}", num_graphs={len(self)}, save_path={self.save_path})'


class DGLBuiltinDataset(DGLDataset):
    """A dataset DGL downloads from `url`: here its raw files must already
    be under raw_path (download() raises DatasetNotFound)."""

    def __init__(self, name, url, raw_dir=None, hash_key=(), force_reload=False, verbose=False, transform=None):
        super().__init__(name, url=url, raw_dir=raw_dir, save_dir=None, hash_key=hash_key, force_reload=force_reload,
                         verbose=verbose, transform=transform)

    def download(self):
        raise DatasetNotFound(f"dataset {self.name!r}: no local copy at {self.raw_path}; dgld downloads nothing: "
                              f"put the unpacked contents of {self.url} there (raw_dir, or DGL_DOWNLOAD_DIR, "
                              "chooses the parent folder)")
