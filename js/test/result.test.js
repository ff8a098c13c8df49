import { describe, expect, it } from "vitest";
import { kerasLabel, renderExpectations, renderResultCard, suppliedLine } from "../src/result.js";
import { byTestId, fixture } from "./helpers.js";

const dense = fixture("dense-float64-mixed").results.jax;
const conv = fixture("conv1d-uint8").results;
const failed = Object.values(conv).find((r) => r.status === "error");
const rejected = fixture("dense-bad-kwarg").results.jax;
const wraps = fixture("power-int8-wraps").results;

describe("result card", () => {
  it("shows a pending state until the backend answers", () => {
    const card = renderResultCard("torch", { status: "pending" });
    expect(card.dataset.status).toBe("pending");
    expect(card.getAttribute("aria-busy")).toBe("true");
    expect(card.textContent).toContain("probing on torch");
    expect(byTestId(card, "cast-path")).toBeNull();
  });

  it("shows the observed, declared and documented dtypes and the verdict", () => {
    const card = renderResultCard("jax", dense);
    expect(card.dataset.status).toBe("ok");
    expect(byTestId(card, "output-dtype").textContent).toBe(dense.output_dtype);
    expect(byTestId(card, "declared-dtype").textContent).toBe(dense.declared_dtype);
    expect(byTestId(card, "documented-dtype").textContent).toBe(dense.documented_dtype);
    expect(byTestId(card, "verdict").title).toBe(dense.verdict);
    expect(byTestId(card, "cast-path")).not.toBeNull();
    expect(byTestId(card, "probe-error")).toBeNull();
  });

  it("shows values wrong, not as documented, when the values were found wrong", () => {
    // issue 38 item 5: the dtype is as documented (int8), the numbers wrapped
    for (const [backend, result] of Object.entries(wraps)) {
      expect(result.verdict).toBe("as-documented");
      expect(result.shown_verdict).toBe("values-wrong");
      const card = renderResultCard(backend, result);
      const badge = byTestId(card, "verdict");
      expect(badge.title).toBe("values-wrong");
      expect(badge.textContent).toBe("values wrong");
      expect(card.dataset.verdict).toBe("values-wrong");
      expect(card.querySelector(".dx-v-as-documented")).toBeNull();
    }
    expect(byTestId(renderResultCard("jax", dense), "verdict").title).toBe(dense.shown_verdict);
  });

  it("lists what the tool supplied on one line, and nothing when every part was given", () => {
    const supplied = [
      { part: "shape", value: "(2, 4)", why: "no shape given: the catalog's" },
      { part: "kwargs", value: "units=4", why: "the catalog's defaults, not given in kwargs" },
    ];
    const card = renderResultCard("jax", { ...dense, supplied });
    const line = byTestId(card, "supplied");
    expect(line.textContent).toBe("supplied by dtype-explorer: shape (2, 4); kwargs units=4");
    expect(line.querySelector("[data-part=kwargs]").title).toBe(supplied[1].why);
    expect(byTestId(renderResultCard("jax", { ...dense, supplied: [] }), "supplied")).toBeNull();
    expect(suppliedLine(undefined)).toBeNull();
  });

  it("shows numerics, variables and the documented basis", () => {
    const card = renderResultCard("jax", dense);
    expect(byTestId(card, "numerics-overflow").textContent).toContain(String(dense.numerics.output_count));
    if (dense.numerics.max_rel_error != null) {
      expect(byTestId(card, "numerics-error").textContent).toContain(dense.numerics.reference_dtype);
    }
    for (const name of Object.keys(dense.variables)) expect(card.textContent).toContain(name);
    const basis = [...byTestId(card, "basis").querySelectorAll("li")].map((li) => li.textContent);
    expect(basis).toEqual(dense.basis);
  });

  it("shows the error type and message where the call raised", () => {
    const card = renderResultCard(failed.backend, failed);
    expect(card.dataset.status).toBe("error");
    expect(byTestId(card, "error-type").textContent).toBe(failed.error.type);
    expect(byTestId(card, "error-message").textContent).toBe(failed.error.message);
    expect(byTestId(card, "output-dtype").textContent).toBe(failed.error.type);
    expect(byTestId(card, "verdict").title).toBe("error");
  });

  it("shows where a kwarg Keras rejects was refused", () => {
    const card = renderResultCard("jax", rejected);
    expect(card.dataset.status).toBe(rejected.status);
    expect(byTestId(card, "error-message").textContent).toBe(rejected.error.message);
    expect(card.textContent).toContain(`raised in ${rejected.error.where}`);
    const raised = byTestId(card, "cast-path").querySelector('.dx-node[data-stage="raised"]');
    expect(raised.dataset.dtype).toBe(rejected.error.type);
  });

  it("flags overflow from finite inputs", () => {
    const overflow = { ...dense, numerics: { ...dense.numerics, nonfinite_from_finite: 3 } };
    const line = byTestId(renderResultCard("jax", overflow), "numerics-overflow");
    expect(line.className).toContain("dx-bad");
    expect(line.textContent).toMatch(/^3 of \d+ output values overflowed/);
  });

  it("reports how long the answer took", () => {
    const card = renderResultCard("jax", dense, { roundTripMs: 42.4 });
    expect(card.textContent).toContain("answered in 42 ms");
  });

  it("is labelled with the Keras that answered", () => {
    const card = renderResultCard("jax", dense);
    expect(byTestId(card, "keras-version").textContent).toBe(`Keras ${dense.versions.keras}`);
    // answered through the widget's request path by a created engine (generate.py)
    const old = fixture("discretization-keras-3-11").results.numpy;
    expect(old.versions).toMatchObject({ keras: "3.11.3", engine: "keras==3.11.3" });
    const oldCard = renderResultCard("numpy", old);
    expect(byTestId(oldCard, "keras-version").textContent).toBe("Keras 3.11.3");
    expect(byTestId(oldCard, "keras-version").title).toBe("engine keras==3.11.3");
    expect(kerasLabel({ versions: { keras: "2.21.0", tf_keras: "2.21.0", engine: "tf_keras==2.21.0" } })).toBe("Keras 2 (tf_keras 2.21.0)");
    expect(byTestId(renderResultCard("torch", { status: "pending" }), "keras-version")).toBeNull();
  });
});

const ALL = ["conv1d-uint8", "dense-float64-mixed", "add-int8-float16", "softmax-large-mixed", "dense-bad-kwarg", "dense-float64-model", "dense-float64-policy-float64", "discretization-keras-3-11"].flatMap(
  (name) => Object.entries(fixture(name).results).map(([backend, result]) => [`${name} on ${backend}`, result]),
);

describe("expectations table", () => {
  it.each(ALL.filter(([, r]) => r.expectations?.length))("shows every expectation side by side: %s", (_, result) => {
    const table = renderExpectations(result);
    const rows = result.expectations.map((x) => byTestId(table, `expectation-${x.source}`));
    expect(rows.every(Boolean)).toBe(true);
    result.expectations.forEach((x, i) => {
      const cells = rows[i].querySelectorAll("td");
      expect(cells[0].textContent).toContain(x.name);
      expect(cells[1].textContent).toBe(x.dtype ?? x.shown);
      expect(cells[2].textContent).toBe(x.why);
    });
    const uses = rows.filter((row) => row.dataset.verdictUses === "true").map((row) => row.dataset.testid);
    expect(uses).toEqual(result.expected_by ? [`expectation-${result.expected_by}`] : []);
    const flagged = rows.filter((row) => row.dataset.disagrees === "true").map((row) => row.dataset.testid.slice("expectation-".length));
    expect(flagged).toEqual(result.disagreeing);
    expect(byTestId(table, "rules-disagree")?.textContent ?? null).toBe(result.rules_disagreement);
    // open where something disagrees, closed (all agree) otherwise
    expect(table.open).toBe(result.disagreeing.length > 0 || result.rules_disagreement != null);
    const said = result.disagreeing.length ? "name another dtype" : result.status === "ok" ? "name the same dtype" : `no answer to compare with: ${result.outcome}`;
    expect(table.querySelector("summary").textContent).toContain(said);
    // a card that raised never says its expectations "agree": there is nothing to agree with
    if (result.status !== "ok") expect(table.querySelector("summary").textContent).not.toContain("same dtype");
  });

  it("says what stood in for an answer where there is none: the call's error, the tool's failure, a timeout", () => {
    const base = ALL.map(([, r]) => r).find((r) => r.expectations?.length);
    for (const [status, outcome] of [["error", "raises ValueError"], ["invalid", "tool failure (KeyError)"], ["timeout", "timeout"]]) {
      const said = renderExpectations({ ...base, status, outcome, disagreeing: [] }).querySelector("summary").textContent;
      expect(said).toContain(`no answer to compare with: ${outcome}`);
      if (status !== "error") expect(said).not.toContain("raise");
    }
  });

  it("says 'no counterpart' with its reason where a library has no comparable call, never '—' or 'raises'", () => {
    const result = {
      ...dense,
      expectations: [
        ...dense.expectations,
        { source: "torch", name: "torch", dtype: null, error: null, basis: "torch.vmap: no counterpart: takes a Python function", no_counterpart: "takes a Python function", shown: "no counterpart", why: "no counterpart: takes a Python function" },
      ],
    };
    const table = renderExpectations(result);
    const said = byTestId(table, "expectation-said-torch");
    expect(said.textContent).toBe("no counterpart");
    expect(said.title).toBe("no counterpart: takes a Python function");
    expect(byTestId(table, "expectation-torch").querySelectorAll("td")[2].textContent).toContain("takes a Python function");
  });

  it("is drawn in the card, and flags at least one disagreement among the fixtures", () => {
    const withOdd = ALL.filter(([, r]) => r.disagreeing?.length);
    expect(withOdd.length).toBeGreaterThan(0);
    const [, result] = withOdd[0];
    const card = renderResultCard(result.backend, result);
    expect(byTestId(card, "expectations")).not.toBeNull();
    const odd = byTestId(card, `expectation-${result.disagreeing[0]}`);
    expect(odd.querySelector(".dx-chip-changed")).not.toBeNull();
  });

  it("draws nothing without expectations", () => {
    expect(renderExpectations({ status: "error", expectations: [] })).toBeNull();
  });
});
