"""Test session setup: the in-process backend is TensorFlow (Keras's default) unless
KERAS_BACKEND says otherwise; the other backends are reached through real worker processes.
Each session gets a fresh, empty result cache."""

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["DTYPE_EXPLORER_CACHE_DIR"] = tempfile.mkdtemp(prefix="dx-test-cache-")
