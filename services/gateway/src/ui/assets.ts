/**
 * The operator web UI's files at `/ui` (the Vite build of the `ui/`
 * workspace, `ui/dist`, built by `npm install`).
 *
 * - `GET /ui` and `GET /ui/` → `index.html`; other paths without a file
 *   extension too (the UI routes in the fragment, but a deep link still loads);
 * - `GET /ui/assets/*` → the file, cached for a year (Vite puts a content
 *   hash in those names);
 * - a missing file → 404, another method → 405, a path escaping the folder
 *   → 404; a UI that was never built → 503 saying how to build it.
 *
 * Everything is served with a strict Content-Security-Policy: the UI loads
 * nothing from anywhere but this origin, and talks only to it.
 */
import { readFile, stat } from "node:fs/promises";
import { extname, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { HttpHandler, HttpRequest, HttpResponse } from "@trellis/runtime";

/** Where the built UI is by default: `ui/dist` at the repository root. */
export const defaultUiDir = fileURLToPath(new URL("../../../../ui/dist/", import.meta.url));

/** The URL path the UI is served under. */
export const uiBasePath = "/ui";

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".woff2": "font/woff2",
};

const securityHeaders: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/** Options of {@link createUiAssetHandler}. */
export interface UiAssetOptions {
  /** Folder of the built UI (default {@link defaultUiDir}). */
  dir?: string;
}

function reply(
  res: HttpResponse,
  status: number,
  body: string | Buffer,
  headers: Record<string, string>,
  head: boolean,
): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = status;
  for (const [name, value] of Object.entries({ ...securityHeaders, ...headers })) {
    res.setHeader(name, value);
  }
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  res.setHeader("content-length", String(bytes.byteLength));
  if (head) res.end();
  else res.end(bytes);
}

function text(res: HttpResponse, status: number, message: string, head: boolean): void {
  reply(res, status, `${message}\n`, { "content-type": "text/plain; charset=utf-8" }, head);
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/** The plain-HTTP handler that serves the UI under `/ui`. */
export function createUiAssetHandler(options: UiAssetOptions = {}): HttpHandler {
  const root = resolve(options.dir ?? defaultUiDir);
  return async (req: HttpRequest, res: HttpResponse) => {
    const url = new URL(req.url ?? "/", "http://gateway.invalid");
    const path = url.pathname;
    if (path !== uiBasePath && !path.startsWith(`${uiBasePath}/`)) return false;
    const method = req.method ?? "GET";
    const head = method === "HEAD";
    if (method !== "GET" && !head) {
      reply(
        res,
        405,
        "method not allowed\n",
        { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" },
        false,
      );
      return true;
    }
    const index = resolve(root, "index.html");
    if (!(await isFile(index))) {
      text(
        res,
        503,
        "The operator UI is not built. Run `npm install` (it builds it) or `npm run build -w @trellis/ui`.",
        head,
      );
      return true;
    }
    let relative: string;
    try {
      relative = decodeURIComponent(path.slice(uiBasePath.length)).replace(/^\/+/, "");
    } catch {
      text(res, 400, "malformed path", head);
      return true;
    }
    if (relative.includes("\0")) {
      text(res, 404, "not found", head);
      return true;
    }
    const target = resolve(root, relative);
    if (target !== root && !target.startsWith(root + sep)) {
      text(res, 404, "not found", head);
      return true;
    }
    const extension = extname(relative);
    if (relative === "" || extension === "") {
      // The app shell: never cached, so a rebuilt UI is picked up at once.
      reply(
        res,
        200,
        await readFile(index),
        { "content-type": contentTypes[".html"]!, "cache-control": "no-cache" },
        head,
      );
      return true;
    }
    if (!(await isFile(target))) {
      text(res, 404, "not found", head);
      return true;
    }
    const immutable = relative.startsWith("assets/");
    reply(
      res,
      200,
      await readFile(target),
      {
        "content-type": contentTypes[extension] ?? "application/octet-stream",
        "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
      },
      head,
    );
    return true;
  };
}

/** `handler`, with the UI served first under `/ui` (every other path goes to `handler`). */
export function withUiAssets(handler: HttpHandler, options: UiAssetOptions = {}): HttpHandler {
  const assets = createUiAssetHandler(options);
  return async (req, res) => (await assets(req, res)) || handler(req, res);
}
