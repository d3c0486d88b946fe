#!/usr/bin/env node
// The `trellis` command. Trellis runs its TypeScript sources through tsx, so
// the CLI registers the loader and then hands over to src/cli/main.ts.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
