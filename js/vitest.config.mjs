import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.js"],
    css: false,
    // No test depends on timing: a loaded 2-core CI machine renders a compact view in ~6 s,
    // over vitest's 5 s default; the limit only stops a hang.
    testTimeout: 120000,
    hookTimeout: 120000,
  },
});
