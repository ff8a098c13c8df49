import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.js"],
    css: false,
    // One jsdom and one module graph for every test file, the files one after another in one
    // worker (fileParallelism: false; a seed then orders them alike on any machine), instead of
    // a new jsdom and module graph per file: 16 files in 4.2 s and 5 CPU-s instead of 13 s and
    // 17 CPU-s on 2 cores. test/setup.js gives each file an empty page and the modules' state
    // as imported; tests/frontends/test_widget.py runs the suite shuffled, so that a test
    // passing only after another one shows, with the seed that reproduces it.
    isolate: false,
    fileParallelism: false,
    setupFiles: ["test/setup.js"],
    // No test depends on timing: a loaded 2-core CI machine renders a compact view in ~6 s,
    // over vitest's 5 s default; the limit only stops a hang.
    testTimeout: 120000,
    hookTimeout: 120000,
  },
});
