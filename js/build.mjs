// Bundle the front ends into the Python package: dtype_explorer/static/widget.{js,css} (the
// widget, an ES module anywidget loads) and dtype_explorer/static/atlas.js (the atlas site's
// script, a classic script views/_atlas.py inlines into every page), and the docs site's widget
// snapshots: ../docs/assets/snapshot/snapshot.{js,css} (html-manager and the anywidget loader,
// docs/_hooks/examples.py adds them to a lesson page; never committed, nothing from a CDN).
import { readFileSync } from "node:fs";
import * as esbuild from "esbuild";

// The licences of what the widget bundles (dagre, its graph layout, with graphlib inside it,
// both MIT): their notice travels in the bundle itself, which is what the package ships.
const bundled = ["@dagrejs/dagre", "@dagrejs/graphlib"];
const notices = bundled.map((name) => `${name}:\n${readFileSync(`node_modules/${name}/LICENSE`, "utf8").trim()}`);
const licences = `/*! Bundled third-party code and its licences.\n\n${notices.join("\n\n").replaceAll("*/", "* /")}\n*/`;

const common = {
  bundle: true,
  target: ["es2022"],
  minify: !process.argv.includes("--watch"),
  sourcemap: false,
  outdir: "../dtype_explorer/static",
  logLevel: "info",
};
const builds = [
  { ...common, entryPoints: { widget: "src/index.js" }, format: "esm", legalComments: "none", footer: { js: licences } },
  { ...common, entryPoints: { atlas: "src/atlas-page.js" }, format: "iife" },
  {
    ...common,
    entryPoints: { snapshot: "src/snapshot/index.js" },
    format: "iife",
    outdir: "../docs/assets/snapshot",
    // Font Awesome's fonts (ipywidgets' icons) as files beside the CSS: the site fetches nothing.
    loader: { ".woff": "file", ".woff2": "file", ".ttf": "file", ".eot": "file", ".svg": "file" },
    define: { "process.env.NODE_ENV": '"production"', global: "globalThis" },
    logLevel: "warning",
  },
];

if (process.argv.includes("--watch")) {
  for (const options of builds) await (await esbuild.context(options)).watch();
} else {
  await Promise.all(builds.map((options) => esbuild.build(options)));
}
