// The operator UI end to end: Debian's Chromium (driven by playwright-core)
// against an embedded Trellis on a free port, every service in one process,
// the UI served by the gateway at /ui. Screenshots of each step go to
// .ci-out/screenshots. Skipped, saying so, only when Chromium is absent.
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { adaptersService } from "@trellis/adapters";
import { chatService } from "@trellis/chat";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../../src/definition.js";
import { ADMIN_KEY } from "../support/conformance.js";
import { harnClient } from "../support/harn-client.js";
import {
  createScriptedAgent,
  echoAgent,
  gatedToolAgent,
  readUiFrames,
  STREAMED_TAIL,
  streamingAgent,
} from "../support/ui-fixtures.js";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const uiDir = join(root, "ui");
const screenshots = join(root, ".ci-out", "screenshots");
const chromiumPath = [
  process.env.TRELLIS_CHROMIUM,
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
]
  .filter((p): p is string => typeof p === "string" && p !== "")
  .find((p) => existsSync(p));

/** What the page says its stream applied (`window.__trellisUi`). */
interface Applied {
  cursors: string[];
  duplicates: number;
  sessionId: string | null;
  resumeCursor: string | null;
}

/** Newest modification time of the files under `dir`, in ms. */
async function newestChange(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    newest = Math.max(newest, (await stat(join(entry.parentPath, entry.name))).mtimeMs);
  }
  return newest;
}

/** A TCP relay between the browser and Trellis that can cut every connection at once. */
async function startRelay(port: number) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(port, "127.0.0.1");
    const done = () => {
      for (const s of [client, upstream]) {
        s.destroy();
        sockets.delete(s);
      }
    };
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", done);
      s.on("close", done);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return {
    url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`,
    /** Cut every open connection (the browser sees the network drop). */
    drop() {
      for (const s of sockets) s.destroy();
    },
    close() {
      this.drop();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

if (!chromiumPath) {
  console.warn(
    "operator UI browser tests SKIPPED: no Chromium at /usr/bin/chromium (install it: apt-get install -y chromium, or set TRELLIS_CHROMIUM)",
  );
}

describe.skipIf(!chromiumPath)("the operator UI in Chromium", () => {
  let trellis: EmbeddedTrellis;
  let base: string;
  let proxy: Awaited<ReturnType<typeof startRelay>>;
  let api: ReturnType<typeof harnClient>;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  let step = 0;
  let echo: string;
  let gated: string;
  let streamer: string;

  const shot = async (name: string) => {
    step += 1;
    await page.screenshot({
      path: join(screenshots, `${String(step).padStart(2, "0")}-${name}.png`),
      fullPage: true,
    });
  };

  const openNewSession = async (agentId: string): Promise<string> => {
    await page.selectOption('[data-testid="new-session-agent"]', agentId);
    await page.click('[data-testid="new-session"]');
    await expect.poll(() => new URL(page.url()).hash).toMatch(/^#\/sessions\//);
    await page.waitForSelector('[data-testid="status"][data-status="active"]');
    return decodeURIComponent((await page.evaluate<string>("window.location.hash")).slice(11));
  };

  /** Wait until `selector` matches exactly `n` elements of the page. */
  const countIs = async (selector: string, n: number) => {
    await page
      .locator(selector)
      .nth(n - 1)
      .waitFor();
    await expect.poll(() => page.locator(selector).count()).toBe(n);
  };

  const send = async (text: string) => {
    await page.fill('[data-testid="composer-input"]', text);
    await page.click('[data-testid="composer-send"]');
  };

  beforeAll(async () => {
    const built = join(uiDir, "dist", "index.html");
    if (
      !existsSync(built) ||
      (await stat(built)).mtimeMs < (await newestChange(join(uiDir, "src")))
    ) {
      // `npm install` builds it (the ui workspace's prepare script); build it
      // here when it did not, or when the sources changed since.
      const { build } = await import("vite");
      await build({ root: uiDir, configFile: join(uiDir, "vite.config.ts"), logLevel: "warn" });
    }
    // Screenshots of this run only.
    await rm(screenshots, { recursive: true, force: true });
    await mkdir(screenshots, { recursive: true });
    trellis = await startEmbedded({
      services: [gatewayService, tasksService, adaptersService, chatService, receiptsService],
      port: 0,
      env: { TRELLIS_API_KEY: ADMIN_KEY, TRELLIS_LOG_LEVEL: "error" },
      logger: createLogger({ service: "e2e", level: "error" }),
    });
    // The browser reaches Trellis through a relay the tests can cut.
    proxy = await startRelay(Number(new URL(trellis.address.url).port));
    base = proxy.url;
    api = harnClient(trellis.address.url, ADMIN_KEY);
    echo = await createScriptedAgent(api, "echo", echoAgent(2500));
    gated = await createScriptedAgent(api, "weather", gatedToolAgent(300));
    streamer = await createScriptedAgent(api, "streamer", streamingAgent(4, 20));
    profile = await mkdtemp(join(tmpdir(), "trellis-chromium-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath!,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      viewport: { width: 1360, height: 900 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(20_000);
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await proxy?.close();
    await trellis?.close({ graceMs: 500 });
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  it("serves the UI at /ui and signs in with the API key", async () => {
    await page.goto(`${base}/ui`);
    await page.waitForSelector('[data-testid="login-key"]');
    await shot("login");
    await page.fill('[data-testid="login-key"]', "not-a-key");
    await page.click('[data-testid="login-submit"]');
    await page.waitForSelector(".login .error");
    expect(await page.textContent(".login .error")).toContain("unauthenticated");
    await page.fill('[data-testid="login-key"]', ADMIN_KEY);
    await page.click('[data-testid="login-submit"]');
    await page.waitForSelector('[data-testid="session-list"]', { state: "attached" });
    expect(await page.evaluate('sessionStorage.getItem("trellis.apiKey")')).toBe(ADMIN_KEY);
    await shot("signed-in");
  });

  it("sends a message and renders the agent's reply", async () => {
    await openNewSession(echo);
    await send("hello there");
    await page.waitForSelector('[data-testid="status"][data-status="running"]');
    await shot("turn-running");
    await page.waitForSelector('[data-testid="chat-entry"][data-role="assistant"]');
    const entries = await page.$$eval('[data-testid="chat-entry"]', (els) =>
      els.map((e) => [e.getAttribute("data-role"), e.querySelector(".text")?.textContent]),
    );
    expect(entries).toEqual([
      ["user", "hello there"],
      ["assistant", "Echo: hello there"],
    ]);
    await page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');
    await shot("reply-rendered");
  });

  it("sends a message and sees streamed tokens", async () => {
    const sessionId = await openNewSession(streamer);
    const full = `Streaming reply to tokens please: ${STREAMED_TAIL}`;
    // Record every text the assistant's reply shows while it grows: the
    // streaming preview, then the confirmed chat entry.
    // (A script string: this file is type-checked without the DOM library.)
    await page.evaluate(`(() => {
      window.__replyTexts = [];
      const read = () => {
        const el =
          document.querySelector('[data-testid="streaming"] .text') ??
          document.querySelector('[data-testid="chat-entry"][data-role="assistant"] .text');
        const text = el?.textContent ?? "";
        if (text !== "" && text !== window.__replyTexts.at(-1)) window.__replyTexts.push(text);
      };
      new MutationObserver(read).observe(document.body, {
        subtree: true,
        childList: true,
        characterData: true,
      });
    })()`);
    await send("tokens please");
    await page.waitForSelector('[data-testid="streaming"]');
    await shot("reply-streaming");
    await page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');
    await page.waitForSelector('[data-testid="streaming"]', { state: "detached" });
    const entries = await page.$$eval('[data-testid="chat-entry"]', (els) =>
      els.map((e) => [e.getAttribute("data-role"), e.querySelector(".text")?.textContent]),
    );
    expect(entries).toEqual([
      ["user", "tokens please"],
      ["assistant", full],
    ]);
    const seen = await page.evaluate<string[]>("window.__replyTexts");
    expect(seen.at(-1)).toBe(full);
    const partial = seen.slice(0, -1);
    // The reply grew through several partial texts, each a prefix of the next.
    expect(partial.length).toBeGreaterThanOrEqual(2);
    for (const [i, text] of partial.entries()) {
      expect(text.length).toBeLessThan(full.length);
      expect((seen[i + 1] ?? "").startsWith(text)).toBe(true);
    }
    await shot("reply-streamed");

    // On the wire: token envelopes carry the reply in pieces, all before its response.
    const stream = await api.stream(`/v1/ui/sessions/${sessionId}/events/stream`);
    const frames = await readUiFrames(stream, (f) => f.type === "turn_end");
    stream.close();
    const responseAt = frames.findIndex((f) => f.type === "response");
    const tokens = frames.filter((f) => f.type === "token");
    expect(tokens.length).toBeGreaterThanOrEqual(2);
    expect(frames.findLastIndex((f) => f.type === "token")).toBeLessThan(responseAt);
    expect(tokens.map((f) => f.payload.text).join("")).toBe(full);
    expect(frames[responseAt]?.payload.text).toBe(full);
  });

  it("shows tool rows by tool_call_id, approves the gated tool and sees the turn finish", async () => {
    await openNewSession(gated);
    await send("Paris");
    await page.waitForSelector(
      '[data-testid="tool-row"][data-tool-call-id="call_1"][data-status="ok"]',
    );
    // The gated call has no outcome while the turn waits for approval.
    await page.waitForSelector(
      '[data-testid="tool-row"][data-tool-call-id="call_2"][data-status="running"]',
    );
    await page.waitForSelector('[data-testid="approval"]');
    expect(await page.textContent('[data-testid="approval"]')).toContain("write_file");
    await page.waitForSelector('[data-testid="status"][data-status="awaiting_approval"]');
    await shot("approval-pending");
    await page.click('[data-testid="approve"]');
    await page.waitForSelector(
      '[data-testid="tool-row"][data-tool-call-id="call_2"][data-status="ok"]',
    );
    await page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');
    await page.waitForSelector('[data-testid="approval"]', { state: "detached" });
    const texts = await page.$$eval(
      '[data-testid="chat-entry"][data-role="assistant"] .text',
      (els) => els.map((e) => e.textContent),
    );
    expect(texts.at(-1)).toBe("Done: the forecast is in forecast.txt.");
    const rows = await page.$$eval('[data-testid="tool-row"]', (els) =>
      els.map((e) => [e.getAttribute("data-tool-call-id"), e.getAttribute("data-status")]),
    );
    expect(rows).toEqual([
      ["call_1", "ok"],
      ["call_2", "ok"],
    ]);
    await shot("approved-and-finished");

    // Receipts arrive from the receipts service; verify one from the panel.
    await page.waitForSelector('[data-testid="receipt-row"]', { timeout: 30_000 });
    await page.click('[data-testid="receipt-row"] [data-testid="verify"]');
    await page.waitForSelector('[data-testid="verification"]');
    expect(await page.textContent('[data-testid="verification"]')).toBe("valid");
    await shot("receipt-verified");
  });

  it("lists resume points and branches a new session from the approval request", async () => {
    const parent = await openNewSession(gated);
    await send("Lyon");
    await page.waitForSelector('[data-testid="approval"]');
    await page.click('[data-testid="approve"]');
    await page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');
    // Session detail's resume points: the request, its resolution, the completed turn.
    await countIs('[data-testid="resume-point"]', 3);
    const kinds = await page.$$eval('[data-testid="resume-point"]', (els) =>
      els.map((e) => e.getAttribute("data-kind")),
    );
    expect(kinds).toEqual(["approval_request", "approval_resolution", "turn_completed"]);
    await shot("resume-points");
    await page.click(
      '[data-testid="resume-point"][data-kind="approval_request"] [data-testid="resume-branch"]',
    );
    await expect
      .poll(() => new URL(page.url()).hash)
      .toMatch(new RegExp(`^#/sessions/(?!${parent}$)`));
    await page.waitForSelector('[data-testid="marker"][data-kind="resume_seed"]');
    await shot("branched-from-resume-point");
    // The branch holds the history up to the approval request, not the approved call's result.
    const branchId = decodeURIComponent(
      (await page.evaluate<string>("window.location.hash")).slice(11),
    );
    const messages = await api.get(`/v1/sessions/${branchId}/messages`);
    const texts = messages.json.data.map((m: { parts: { text?: string }[] }) =>
      m.parts.map((p) => p.text ?? "").join(""),
    );
    expect(texts.at(-1)).toBe("It is sunny. May I write the forecast to a file?");
    expect(texts).not.toContain("Done: the forecast is in forecast.txt.");
  });

  it("denies a gated tool: the row ends denied", async () => {
    await openNewSession(gated);
    await send("Oslo");
    await page.waitForSelector('[data-testid="approval"]');
    await page.click('[data-testid="deny"]');
    await page.waitForSelector(
      '[data-testid="tool-row"][data-tool-call-id="call_2"][data-status="denied"]',
    );
    await page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');
    await shot("denied");
  });

  it("reloads mid-turn and loses or doubles nothing", async () => {
    const sessionId = await openNewSession(echo);
    await send("first");
    await page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');
    await send("second");
    // Reload while the second turn runs (the agent takes 2.5 s).
    await page.waitForSelector('[data-testid="status"][data-status="running"]');
    await page.reload();
    await page.waitForSelector('[data-testid="status"]');
    await shot("reloaded-mid-turn");
    await countIs('[data-testid="chat-entry"][data-role="assistant"]', 2);
    await page.waitForSelector('[data-testid="status"][data-status="idle"]');
    const entries = await page.$$eval('[data-testid="chat-entry"] .text', (els) =>
      els.map((e) => e.textContent),
    );
    expect(entries).toEqual(["first", "Echo: first", "second", "Echo: second"]);
    // What the page applied is exactly what the server's stream holds, once each.
    const applied = await page.evaluate<Applied | undefined>("window.__trellisUi");
    expect(applied?.sessionId).toBe(sessionId);
    expect(applied?.duplicates).toBe(0);
    const stream = await api.stream(`/v1/ui/sessions/${sessionId}/events/stream`);
    const last = applied!.cursors.at(-1);
    const server = await readUiFrames(stream, (f) => f.id === last);
    stream.close();
    expect(applied!.cursors).toEqual(server.flatMap((f) => (f.id ? [f.id] : [])));
    await shot("after-reload-complete");
  });

  it("resumes from its cursor after the connection drops mid-turn", async () => {
    const sessionId = await openNewSession(echo);
    await send("alpha");
    await page.waitForSelector('[data-testid="status"][data-status="running"]');
    const before = await page.evaluate<Applied | undefined>("window.__trellisUi");
    proxy.drop();
    await page.waitForSelector(".conn.retrying", { state: "attached" });
    await shot("connection-dropped");
    await page.waitForSelector('[data-testid="status"][data-status="idle"]');
    const entries = await page.$$eval('[data-testid="chat-entry"] .text', (els) =>
      els.map((e) => e.textContent),
    );
    expect(entries).toEqual(["alpha", "Echo: alpha"]);
    const applied = await page.evaluate<Applied | undefined>("window.__trellisUi");
    // It reconnected with Last-Event-ID: the server resumed after a cursor the
    // page had applied — the last one before the drop, which is this one or a
    // later frame that arrived between reading `before` and the drop.
    const cursors = applied?.cursors ?? [];
    const resumedAt = cursors.indexOf(applied?.resumeCursor ?? "");
    expect(resumedAt).toBeGreaterThanOrEqual(cursors.indexOf(before?.cursors.at(-1) ?? ""));
    expect(resumedAt).toBeGreaterThanOrEqual(0);
    expect(applied?.duplicates).toBe(0);
    const stream = await api.stream(`/v1/ui/sessions/${sessionId}/events/stream`);
    const last = applied!.cursors.at(-1);
    const server = await readUiFrames(stream, (f) => f.id === last);
    stream.close();
    expect(applied!.cursors).toEqual(server.flatMap((f) => (f.id ? [f.id] : [])));
    await shot("resumed-after-drop");
  });

  it("branches from an earlier message into a new session with the earlier history", async () => {
    const parent = await openNewSession(echo);
    await send("one");
    await page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');
    await send("two");
    await countIs('[data-testid="chat-entry"][data-role="assistant"]', 2);
    const firstReply = page.locator('[data-testid="chat-entry"][data-role="assistant"]').first();
    await firstReply.hover();
    await firstReply.locator('[data-testid="branch"]').click();
    await expect
      .poll(() => new URL(page.url()).hash)
      .toMatch(new RegExp(`^#/sessions/(?!${parent}$)`));
    await countIs('[data-testid="inherited-entry"]', 2);
    const inherited = await page.$$eval('[data-testid="inherited-entry"] .text', (els) =>
      els.map((e) => e.textContent),
    );
    expect(inherited).toEqual(["one", "Echo: one"]);
    await page.waitForSelector('[data-testid="marker"][data-kind="resume_seed"]');
    await shot("branched");
    await send("three");
    await page.waitForSelector('[data-testid="chat-entry"][data-role="assistant"]');
    expect(await page.textContent('[data-testid="chat-entry"][data-role="assistant"] .text')).toBe(
      "Echo: three",
    );
    // The branch's agent saw the inherited history, not the parent's later turn.
    const branchId = decodeURIComponent(
      (await page.evaluate<string>("window.location.hash")).slice(11),
    );
    const messages = await api.get(`/v1/sessions/${branchId}/messages`);
    const texts = messages.json.data.map((m: { parts: { text?: string }[] }) =>
      m.parts.map((p) => p.text ?? "").join(""),
    );
    expect(texts).toEqual(["one", "Echo: one", "three", "Echo: three"]);
    await shot("branch-continued");
  });

  it("switches to the debug tier and shows the debug-only envelopes", async () => {
    await page.check('[data-testid="debug-toggle"]');
    await page.waitForSelector('[data-testid="debug-log"]');
    await page
      .locator('[data-testid="debug-log"] strong', { hasText: "turn_start" })
      .first()
      .waitFor();
    await shot("debug-tier");
    await page.uncheck('[data-testid="debug-toggle"]');
    await page.waitForSelector('[data-testid="debug-log"]', { state: "detached" });
  });
});
