// Bundle the front ends into the Python package: dtype_explorer/static/widget.{js,css} (the
// widget, an ES module anywidget loads) and dtype_explorer/static/atlas.js (the atlas site's
// script, a classic script views/_atlas.py inlines into every page), and the docs site's widget
// snapshots: ../docs/assets/snapshot/snapshot.{js,css} (html-manager and the anywidget loader,
// docs/_hooks/examples.py adds them to a lesson page; never committed, nothing from a CDN).
import * as esbuild from "esbuild";

const common = {
  bundle: true,
  target: ["es2022"],
  minify: !process.argv.includes("--watch"),
  sourcemap: false,
  outdir: "../dtype_explorer/static",
  logLevel: "info",
};
const builds = [
  { ...common, entryPoints: { widget: "src/index.js" }, format: "esm" },
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
