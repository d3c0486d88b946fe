// The operator UI's files at /ui: the app shell, hashed assets, and every
// refusal (missing file, escaping path, other method, UI not built), over a
// real HTTP server with a folder made for the test.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { HttpHandler } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withUiAssets } from "../src/ui/assets.js";

/** The status of a GET of `path` exactly as written. */
function rawStatus(base: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/`, { path }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the UI asset handler", () => {
  let root: string;
  let dir: string;
  let server: Server;
  let base: string;
  let missingDir: Server;
  let missingBase: string;

  const listen = (s: Server) =>
    new Promise<string>((resolve) => {
      s.listen(0, "127.0.0.1", () => {
        const address = s.address();
        resolve(`http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`);
      });
    });

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "trellis-ui-"));
    dir = join(root, "dist");
    await mkdir(join(dir, "assets"), { recursive: true });
    await writeFile(join(dir, "index.html"), "<!doctype html><title>ui</title>");
    await writeFile(join(dir, "assets", "app-1a2b.js"), "console.log(1)");
    await writeFile(join(dir, "robots.txt"), "no");
    await writeFile(join(root, "secret.txt"), "outside");
    // Everything else falls through to the next handler (the REST surface).
    const next: HttpHandler = async (_req, res) => {
      res.statusCode = 299;
      res.end("next");
      return true;
    };
    const handler = withUiAssets(next, { dir });
    server = createServer((req, res) => void handler(req, res));
    base = await listen(server);
    const unbuilt = withUiAssets(next, { dir: join(dir, "nope") });
    missingDir = createServer((req, res) => void unbuilt(req, res));
    missingBase = await listen(missingDir);
  });

  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await new Promise((r) => missingDir.close(r));
    await rm(root, { recursive: true, force: true });
  });

  it("serves the app shell at /ui, /ui/ and deep links, uncached, with a strict CSP", async () => {
    for (const path of ["/ui", "/ui/", "/ui/sessions/ses_1"]) {
      const response = await fetch(`${base}${path}`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(response.headers.get("cache-control")).toBe("no-cache");
      expect(response.headers.get("content-security-policy")).toContain("default-src 'self'");
      expect(response.headers.get("x-content-type-options")).toBe("nosniff");
      expect(await response.text()).toContain("<title>ui</title>");
    }
  });

  it("serves hashed assets with a long cache and other files without", async () => {
    const asset = await fetch(`${base}/ui/assets/app-1a2b.js`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(asset.headers.get("cache-control")).toContain("immutable");
    expect(await asset.text()).toBe("console.log(1)");
    const robots = await fetch(`${base}/ui/robots.txt`);
    expect(robots.headers.get("cache-control")).toBe("no-cache");
    const head = await fetch(`${base}/ui/assets/app-1a2b.js`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe("14");
    expect(await head.text()).toBe("");
  });

  it("refuses what it must not serve", async () => {
    expect((await fetch(`${base}/ui/assets/nope.js`)).status).toBe(404);
    // Paths sent verbatim (fetch would normalize them first).
    expect(await rawStatus(base, "/ui/..%2fsecret.txt")).toBe(404);
    expect(await rawStatus(base, "/ui/%2e%2e%2f%2e%2e%2fsecret.txt")).toBe(404);
    expect(await rawStatus(base, "/ui/assets/..%2f..%2f..%2fsecret.txt")).toBe(404);
    // Dot segments are resolved before routing: this path is not under /ui at all.
    expect(await rawStatus(base, "/ui/../secret.txt")).toBe(299);
    expect((await fetch(`${base}/ui/%00.js`)).status).toBe(404);
    expect((await fetch(`${base}/ui/%E0%A4%A.js`)).status).toBe(400);
    const post = await fetch(`${base}/ui`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
  });

  it("leaves every other path to the next handler", async () => {
    for (const path of ["/v1/sessions", "/uix", "/", "/trellis.tasks.v1.TaskService/GetTask"]) {
      const response = await fetch(`${base}${path}`);
      expect(response.status).toBe(299);
    }
  });

  it("says how to build the UI when it was never built", async () => {
    const response = await fetch(`${missingBase}/ui`);
    expect(response.status).toBe(503);
    expect(await response.text()).toContain("npm run build -w @trellis/ui");
  });
});
