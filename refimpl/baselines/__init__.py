"""Baselines the papers compare against, written out readably (exact QPs, SMO for SVR, KFD, RSVM, RSS, ...).

Each module names the paper and equation it follows; scikit-learn's SVC/SVR/NuSVR/KernelPCA are
used directly where the papers use LIBSVM or KPCA.
"""
