// Vite build of the operator UI: served by the gateway under /ui, so every
// asset URL starts with /ui/; no CDN, no external fonts, no inline scripts.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/ui/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
  },
  server: {
    // `npm run dev -w @trellis/ui`: the API of a running `npm start`.
    proxy: { "/v1": "http://127.0.0.1:8080" },
  },
});
