"""Files in and out: corevector's model files, LIBSVM's model files, and the readers of users' data files.

* :mod:`~corevector.io.model_files` -- :func:`save_model` / :func:`load_model`: a versioned JSON header and
  ``.npy`` arrays in one ZIP, no code; every value checked against its class's declaration
  (:mod:`~corevector.io.modelspec`) before anything is built;
* :mod:`~corevector.io.libsvm` -- :func:`save_libsvm_model` / :func:`load_libsvm_model`: LIBSVM's text model
  files (the model in LIBSVM's terms, and ``to_sklearn()``, are :mod:`corevector._libsvm_layout`'s);
* :mod:`~corevector.io.readers` -- the command line's data files: format sniffing, LIBSVM and CSV rows,
  labels, columns matched to a model's feature names;
* :mod:`~corevector.io.files` -- :func:`~corevector.io.files.atomic_write`, through which every file is written.

Estimator classes are found through :mod:`corevector.registry`, never imported one by one: a file names its
class, and the registry says which classes exist.
"""
from .libsvm import LibsvmModelError, load_libsvm_model, save_libsvm_model
from .model_files import ModelFileError, load_model, save_model

__all__ = ["save_model", "load_model", "ModelFileError", "save_libsvm_model", "load_libsvm_model",
           "LibsvmModelError"]
