"""Test session setup: the in-process backend is TensorFlow (Keras's default) unless
KERAS_BACKEND says otherwise; the other backends are reached through real worker processes."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("DTYPE_EXPLORER_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "dx-cache"))
