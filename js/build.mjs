// Bundle the widget into the Python package: dtype_explorer/static/widget.{js,css}.
import * as esbuild from "esbuild";

const options = {
  entryPoints: { widget: "src/index.js" },
  bundle: true,
  format: "esm",
  target: ["es2022"],
  minify: !process.argv.includes("--watch"),
  sourcemap: false,
  outdir: "../dtype_explorer/static",
  logLevel: "info",
};

if (process.argv.includes("--watch")) {
  const context = await esbuild.context(options);
  await context.watch();
} else {
  await esbuild.build(options);
}
