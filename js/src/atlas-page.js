// The atlas site's entry point: bundled (as a classic script) into dtype_explorer/static/atlas.js.
import { start } from "./atlas.js";

start(document);
