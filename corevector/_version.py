"""corevector's version, in a module of its own: the model files' headers and the command line read it without
importing the package's estimators."""
__version__ = "0.1.0"
