// Copies the pinned uPlot from node_modules into vendor/, the only
// third-party files the pages load. The page sources in src/ are served as
// they are: there is nothing to bundle. The output depends only on
// package-lock.json, so `make ui` reproduces the committed vendor/
// byte-for-byte.
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const vendor = join(here, "vendor");
rmSync(vendor, { recursive: true, force: true });
mkdirSync(vendor);
const uplot = join(here, "node_modules", "uplot", "dist");
for (const f of ["uPlot.iife.min.js", "uPlot.min.css"]) copyFileSync(join(uplot, f), join(vendor, f));
copyFileSync(join(here, "node_modules", "uplot", "LICENSE"), join(vendor, "uPlot.LICENSE.txt"));
