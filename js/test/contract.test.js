import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CONTROL_TRAITS, PAGE_WRITES, REQUEST_KEYS, TRAITS } from "../src/contract.js";
import { fixture } from "./helpers.js";

const contract = JSON.parse(readFileSync("../dtype_explorer/frontends/widget_contract.json", "utf8"));

describe("the widget contract", () => {
  it("is what the page listens to and reads", () => {
    expect(TRAITS).toEqual(Object.keys(contract.traits));
    expect(TRAITS.length).toBeGreaterThan(10);
    // index.js subscribes to exactly the contract's traits (no list of its own)
    const index = readFileSync("src/index.js", "utf8");
    expect(index).not.toMatch(/const KEYS/);
    expect(index).toMatch(/TRAITS/);
  });

  it("lets the page write only its request", () => {
    expect(PAGE_WRITES).toEqual(["request"]);
  });

  it("matches the control state the Python side published", () => {
    // widget-state.json is made by fixtures/generate.py from a real DtypeExplorer
    expect(Object.keys(fixture("widget-state")).sort()).toEqual([...CONTROL_TRAITS].sort());
  });

  it("names the keys of the request, and the page's typedefs are generated from it", () => {
    expect(REQUEST_KEYS).toEqual(Object.keys(contract.request));
    expect(Object.keys(fixture("widget-state").request).sort()).toEqual([...REQUEST_KEYS].sort());
    const types = readFileSync("src/contract-types.js", "utf8");
    for (const key of REQUEST_KEYS) expect(types).toMatch(new RegExp(`@property \\{[^}]+\\} ${key} `));
  });
});
