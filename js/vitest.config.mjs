import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.js"],
    css: false,
    // One jsdom for every test file, one after another, instead of a new jsdom and module
    // graph per file: 16 files in 4.7 s and 6 CPU-s instead of 13 s and 17 CPU-s on 2 cores.
    // test/setup.js gives each file an empty page; passing in any order is checked by
    // tests/frontends/test_widget.py (the suite is run shuffled there too).
    isolate: false,
    setupFiles: ["test/setup.js"],
    // No test depends on timing: a loaded 2-core CI machine renders a compact view in ~6 s,
    // over vitest's 5 s default; the limit only stops a hang.
    testTimeout: 120000,
    hookTimeout: 120000,
  },
});
