// `npm install` builds the UI (this workspace's `prepare` script) so the
// gateway can serve ui/dist. A production install without dev dependencies
// has no Vite: say so and leave the UI unbuilt (the gateway answers /ui with
// a 503 that says how to build it) instead of failing the install.
import { fileURLToPath } from "node:url";

let build;
try {
  ({ build } = await import("vite"));
} catch {
  console.warn(
    "@trellis/ui: Vite is not installed (dev dependencies omitted); the UI was not built.",
  );
  process.exit(0);
}
await build({
  root: fileURLToPath(new URL("..", import.meta.url)),
  configFile: fileURLToPath(new URL("../vite.config.ts", import.meta.url)),
  logLevel: "warn",
});
