import { afterEach, describe, expect, it, vi } from "vitest";
import { App } from "../src/app.js";
import { PALETTE, statusTone, themeProperties, verdictTone } from "../src/palette.js";
import { luminance, pageTheme, parseColor, watchTheme } from "../src/theme.js";
import { byTestId } from "./helpers.js";

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

function widget() {
  const el = document.createElement("div");
  document.body.replaceChildren(el);
  return el;
}

afterEach(() => {
  for (const node of [document.documentElement, document.body]) {
    for (const name of node.getAttributeNames()) if (name !== "lang") node.removeAttribute(name);
  }
  vi.unstubAllGlobals();
});

describe("the page's theme", () => {
  it("is what the host says: JupyterLab, VS Code, marimo, Colab", () => {
    const el = widget();
    const cases = [
      [document.body, "data-jp-theme-light", "false", "dark"],
      [document.body, "data-jp-theme-light", "true", "light"],
      [document.body, "class", "vscode-dark", "dark"],
      [document.body, "class", "vscode-high-contrast", "dark"],
      [document.body, "class", "vscode-high-contrast vscode-high-contrast-light", "light"],
      [document.body, "class", "dark dark-theme", "dark"], // marimo
      [document.body, "class", "light light-theme", "light"],
      [document.documentElement, "theme", "dark", "dark"], // Colab
    ];
    for (const [node, name, value, theme] of cases) {
      node.setAttribute(name, value);
      expect(pageTheme(el), `${name}=${value}`).toBe(theme);
      node.removeAttribute(name);
    }
  });

  it("is read from the background around the widget where the host says nothing, across a shadow root", () => {
    const host = document.createElement("div");
    host.style.backgroundColor = "rgb(24, 28, 26)";
    document.body.replaceChildren(host);
    const el = document.createElement("div");
    host.attachShadow({ mode: "open" }).append(el);
    expect(pageTheme(el)).toBe("dark");
    host.style.backgroundColor = "rgb(250, 250, 250)";
    expect(pageTheme(el)).toBe("light");
  });

  it("is the system's preference where nothing else says", () => {
    const el = widget();
    vi.stubGlobal("matchMedia", (query) => ({ matches: query === "(prefers-color-scheme: dark)" }));
    expect(pageTheme(el)).toBe("dark");
    vi.stubGlobal("matchMedia", () => ({ matches: false }));
    expect(pageTheme(el)).toBe("light");
  });

  it("is followed when the host switches it", async () => {
    const el = widget();
    document.body.setAttribute("data-jp-theme-light", "true");
    const seen = [];
    const stop = watchTheme(el, (theme) => seen.push(theme));
    document.body.setAttribute("data-jp-theme-light", "false");
    await settle();
    stop();
    document.body.setAttribute("data-jp-theme-light", "true");
    await settle();
    expect(seen).toEqual(["light", "dark"]);
  });

  it("reads the colours getComputedStyle gives", () => {
    expect(parseColor("rgb(255, 255, 255)")).toEqual([1, 1, 1, 1]);
    expect(parseColor("rgba(0, 0, 0, 0)")).toEqual([0, 0, 0, 0]);
    expect(parseColor("color(srgb 0.0941176 0.109804 0.101961)")?.slice(0, 3).map((c) => c.toFixed(2))).toEqual(["0.09", "0.11", "0.10"]);
    expect(parseColor("transparent")).toBeNull();
    expect(luminance([1, 1, 1])).toBeCloseTo(1);
    expect(luminance([0, 0, 0])).toBe(0);
  });
});

describe("the theme's colours", () => {
  it("are the host's variables first, then the palette's colour of that theme", () => {
    for (const theme of ["light", "dark"]) {
      const properties = themeProperties(theme);
      for (const [role, colour] of Object.entries(PALETTE.themes[theme])) {
        const value = properties[`--dx-${role}`];
        expect(value.endsWith(colour + ")".repeat((PALETTE.theme_hosts[role] ?? []).length))).toBe(true);
        for (const host of PALETTE.theme_hosts[role] ?? []) expect(value).toContain(`var(${host}, `);
      }
      // verdicts and statuses drawn as text: their dark colours on a dark background
      const tones = theme === "dark" ? PALETTE.on_dark : PALETTE;
      expect(properties["--dx-verdicts-deviates"]).toBe(tones.verdicts.deviates);
      expect(properties["--dx-statuses-error"]).toBe(tones.statuses.error);
    }
    expect(verdictTone("deviates")).toBe("var(--dx-verdicts-deviates)");
    expect(statusTone("unsupported")).toBe("var(--dx-statuses-unsupported)");
  });

  it("are set on the explorer's root, light until the page says dark", () => {
    const el = widget();
    const app = new App(el, { send: () => {} });
    const root = byTestId(el, "explorer");
    expect(root.dataset.theme).toBe("light");
    expect(root.style.getPropertyValue("--dx-bg")).toContain(PALETTE.themes.light.bg);
    app.setTheme("dark");
    expect(root.dataset.theme).toBe("dark");
    expect(root.style.colorScheme).toBe("dark");
    expect(root.style.getPropertyValue("--dx-fg")).toContain(PALETTE.themes.dark.fg);
    expect(root.style.getPropertyValue("--dx-verdicts-error")).toBe(PALETTE.on_dark.verdicts.error);
  });
});
