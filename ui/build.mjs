// Builds dist/ (embedded by the Go package in this directory) from src/ and
// the pinned uPlot in node_modules. The output depends only on those files,
// so `make ui` reproduces the committed dist/ byte-for-byte.
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const dist = join(here, "dist");
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);
for (const f of readdirSync(join(here, "src")).sort()) copyFileSync(join(here, "src", f), join(dist, f));
const uplot = join(here, "node_modules", "uplot", "dist");
for (const f of ["uPlot.iife.min.js", "uPlot.min.css"]) copyFileSync(join(uplot, f), join(dist, f));
copyFileSync(join(here, "node_modules", "uplot", "LICENSE"), join(dist, "uPlot.LICENSE.txt"));
