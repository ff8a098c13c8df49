// Run before each test file (vitest.config.mjs: setupFiles). The files share one jsdom
// (isolate: false), so each one starts from an empty page: no element, attribute, style or
// stubbed global left by the file before it.
import { afterAll, beforeAll, vi } from "vitest";

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
afterAll(emptyPage);
