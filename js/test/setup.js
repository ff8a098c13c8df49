// Run before each test file (vitest.config.mjs: setupFiles). The files share one jsdom and one
// module graph (isolate: false), so each file starts from an empty page (no element, attribute,
// style, stubbed global, mock or fake timer left by the file before it) and, once its tests have
// run, leaves the modules' own state as a fresh import has it: no dtype families taken (a file
// sets its own at its top level, before this file's beforeAll) and the page's address unchanged.
import { afterAll, beforeAll, vi } from "vitest";
import { setDtypeFamilies } from "../src/dtype.js";

function emptyPage() {
  for (const node of [document.documentElement, document.body]) {
    for (const name of node.getAttributeNames()) if (name !== "lang") node.removeAttribute(name);
  }
  document.head.replaceChildren();
  document.body.replaceChildren();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  vi.useRealTimers();
}

beforeAll(emptyPage);
afterAll(() => {
  emptyPage();
  setDtypeFamilies({});
  window.history.replaceState(null, "", "/");
});
