// The operator UI end to end: Debian's Chromium (driven by playwright-core)
// against an embedded Trellis on a free port, every service in one process,
// the UI served by the gateway at /ui. Every flow runs at 1280×800 and on a
// phone (390×844, touch), with an axe-core scan of the sign-in, session and
// approval views, a check for horizontal overflow and for console errors.
// Screenshots of each step go to .ci-out/screenshots. Skipped, saying so,
// only when Chromium is absent.
import { mkdir, readFile, rm } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { adaptersService } from "@trellis/adapters";
import { chatService } from "@trellis/chat";
import { harnClient } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../../src/definition.js";
import { buildUiIfStale, chromiumPath, screenshots } from "../support/browser.js";
import { ADMIN_KEY } from "../support/conformance.js";
import {
  createScriptedAgent,
  echoAgent,
  gatedToolAgent,
  readUiFrames,
  STREAMED_TAIL,
  streamingAgent,
} from "../support/ui-fixtures.js";

/** What the page says its stream applied (`window.__trellisUi`). */
interface Applied {
  cursors: string[];
  duplicates: number;
  sessionId: string | null;
  resumeCursor: string | null;
}

/** One axe-core violation, as the scan reports it. */
interface Violation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
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

const SIZES = [
  { name: "desktop", width: 1280, height: 800, phone: false },
  { name: "phone", width: 390, height: 844, phone: true },
] as const;

describe.skipIf(!chromiumPath)("the operator UI in Chromium", () => {
  let trellis: EmbeddedTrellis;
  let base: string;
  let proxy: Awaited<ReturnType<typeof startRelay>>;
  let api: ReturnType<typeof harnClient>;
  let browser: Browser;
  let axeSource: string;
  let echo: string;
  let gated: string;
  let streamer: string;

  beforeAll(async () => {
    await buildUiIfStale();
    // Screenshots of this run only.
    await rm(screenshots, { recursive: true, force: true });
    await mkdir(screenshots, { recursive: true });
    axeSource = await readFile(fileURLToPath(import.meta.resolve("axe-core/axe.min.js")), "utf8");
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
    echo = await createScriptedAgent(api, "Echo assistant", echoAgent(2500));
    gated = await createScriptedAgent(api, "Weather planner", gatedToolAgent(300));
    streamer = await createScriptedAgent(api, "Streamer", streamingAgent(4, 20));
    browser = await chromium.launch({
      executablePath: chromiumPath!,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await trellis?.close({ graceMs: 500 });
  });

  for (const size of SIZES) {
    describe(`at ${size.width}×${size.height} (${size.name})`, () => {
      let context: BrowserContext;
      let page: Page;
      let step = 0;
      /** Console errors and page errors since the last check. */
      let consoleErrors: string[] = [];

      const shot = async (name: string) => {
        step += 1;
        await page.screenshot({
          path: join(screenshots, `${size.name}-${String(step).padStart(2, "0")}-${name}.png`),
        });
      };

      /** No console error since the last check (then forget what was expected). */
      const noConsoleErrors = () => {
        const seen = consoleErrors;
        consoleErrors = [];
        expect(seen).toEqual([]);
      };

      /** Nothing reaches past the viewport's right edge unless a scroll area clips it. */
      const noHorizontalOverflow = async () => {
        const offenders = await page.evaluate<string[]>(`(() => {
          const width = document.documentElement.clientWidth;
          const out = [];
          if (document.documentElement.scrollWidth > width + 1) out.push("html scrollWidth " + document.documentElement.scrollWidth);
          for (const el of document.querySelectorAll("body *")) {
            const r = el.getBoundingClientRect();
            if (r.width === 0 || r.height === 0) continue;
            if (r.right <= width + 1 && r.left >= -1) continue;
            let clipped = false;
            for (let a = el.parentElement; a; a = a.parentElement) {
              const o = getComputedStyle(a).overflowX;
              if (o !== "visible") {
                const ar = a.getBoundingClientRect();
                if (ar.right <= width + 1 && ar.left >= -1) { clipped = true; break; }
              }
            }
            if (!clipped) out.push(el.tagName + "." + el.className + " " + Math.round(r.left) + ".." + Math.round(r.right));
          }
          return out.slice(0, 10);
        })()`);
        expect(offenders).toEqual([]);
      };

      /** axe-core on the page as it is: no serious or critical violation. */
      const axeScan = async (view: string) => {
        await page.evaluate(axeSource);
        const violations = await page.evaluate<Violation[]>(`axe
          .run(document, { resultTypes: ["violations"] })
          .then((r) => r.violations.map((v) => ({
            id: v.id,
            impact: v.impact,
            help: v.help,
            targets: v.nodes.slice(0, 3).map((n) => n.target.join(" ")),
          })))`);
        const bad = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
        expect(bad, `axe on the ${view} view`).toEqual([]);
      };

      const drawerToggle = () => page.getByRole("button", { name: "Sessions", exact: true });
      const drawerOpen = async () =>
        (await drawerToggle().getAttribute("aria-expanded")) === "true";

      const showSessions = async () => {
        if (!(await drawerOpen())) await drawerToggle().click();
      };

      const currentSession = async () =>
        decodeURIComponent((await page.evaluate<string>("window.location.hash")).slice(11));

      const openNewSession = async (agentId: string): Promise<string> => {
        await showSessions();
        const before = new URL(page.url()).hash;
        await page.getByLabel("Agent", { exact: true }).selectOption(agentId);
        await page.getByRole("button", { name: "New session" }).click();
        await expect.poll(() => new URL(page.url()).hash).toMatch(/^#\/sessions\//);
        await expect.poll(() => new URL(page.url()).hash).not.toBe(before);
        await page.waitForSelector('[data-testid="status"][data-status="active"]');
        if (size.phone) expect(await drawerOpen()).toBe(false);
        return currentSession();
      };

      /** Wait until `selector` matches exactly `n` elements of the page. */
      const countIs = async (selector: string, n: number) => {
        await page
          .locator(selector)
          .nth(n - 1)
          .waitFor({ state: "attached" });
        await expect.poll(() => page.locator(selector).count()).toBe(n);
      };

      const send = async (text: string) => {
        await page.getByRole("textbox", { name: "Message" }).fill(text);
        await page.getByRole("button", { name: "Send" }).click();
      };

      /** Wait until the turn shown has completed. */
      const turnCompleted = () =>
        page.waitForSelector('[data-testid="turn-status"][data-turn-status="completed"]');

      /**
       * What the page applied (`window.__trellisUi`) is exactly what the
       * server's UI stream of `sessionId` holds, once each.
       */
      const appliedAsServed = async (sessionId: string, applied: Applied | undefined) => {
        expect(applied?.duplicates).toBe(0);
        const stream = await api.stream(`/v1/ui/sessions/${sessionId}/events/stream`);
        const last = applied!.cursors.at(-1);
        const server = await readUiFrames(stream, (f) => f.id === last);
        stream.close();
        expect(applied!.cursors).toEqual(server.flatMap((f) => (f.id ? [f.id] : [])));
      };

      /** A new echo session with `first` answered and `second` sent (its turn under way); its id. */
      const secondTurnSent = async (first: string, second: string): Promise<string> => {
        const sessionId = await openNewSession(echo);
        await send(first);
        await turnCompleted();
        await send(second);
        return sessionId;
      };

      const texts = (selector: string) =>
        page.$$eval(selector, (els) => els.map((e) => e.textContent ?? ""));

      const press = async (locator: ReturnType<Page["locator"]>) => {
        if (size.phone) await locator.tap();
        else await locator.click();
      };

      beforeAll(async () => {
        context = await browser.newContext({
          viewport: { width: size.width, height: size.height },
          ...(size.phone ? { isMobile: true, hasTouch: true, deviceScaleFactor: 2 } : {}),
        });
        page = await context.newPage();
        page.setDefaultTimeout(20_000);
        page.on("console", (message) => {
          if (message.type() === "error") consoleErrors.push(message.text());
        });
        page.on("pageerror", (error) => consoleErrors.push(`pageerror: ${error.message}`));
      });

      afterAll(async () => {
        await context?.close();
      });

      it("serves the UI at /ui and signs in with the API key", async () => {
        await page.goto(`${base}/ui`);
        await page.getByLabel("API key").waitFor();
        await axeScan("sign-in");
        await noHorizontalOverflow();
        await shot("login");
        await page.getByLabel("API key").fill("not-a-key");
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.getByRole("alert").waitFor();
        expect(await page.getByRole("alert").textContent()).toContain("unauthenticated");
        // The refused key's 401 is the one console error expected here.
        expect(consoleErrors.every((e) => e.includes("401"))).toBe(true);
        consoleErrors = [];
        await page.getByLabel("API key").fill(ADMIN_KEY);
        await page.getByRole("button", { name: "Sign in" }).click();
        await drawerToggle().waitFor();
        expect(await page.evaluate('sessionStorage.getItem("trellis.apiKey")')).toBe(ADMIN_KEY);
        await showSessions();
        await page.getByRole("button", { name: "New session" }).waitFor();
        await noHorizontalOverflow();
        await shot("signed-in");
        // The drawer collapses and comes back.
        await drawerToggle().click();
        await page.getByRole("button", { name: "New session" }).waitFor({ state: "hidden" });
        await drawerToggle().click();
        await page.getByRole("button", { name: "New session" }).waitFor();
        if (size.phone) {
          // On a phone it is a drawer over the page: choosing closes it, Escape too.
          await page.keyboard.press("Escape");
          await page.getByRole("button", { name: "New session" }).waitFor({ state: "hidden" });
        }
        noConsoleErrors();
      });

      it("sends a message, shows the reply in the transcript, and remembers the agent", async () => {
        await openNewSession(echo);
        await send("hello there");
        await page.waitForSelector('[data-testid="status"][data-status="running"]');
        // While the turn runs, Send gives way to Stop and the agent is shown working.
        await page.getByRole("button", { name: "Stop" }).waitFor();
        expect(await page.getByRole("button", { name: "Send" }).count()).toBe(0);
        await page.getByTestId("typing").waitFor();
        await shot("turn-running");
        await page.waitForSelector('[data-testid="chat-entry"][data-role="assistant"]');
        const entries = await page.$$eval('[data-testid="chat-entry"]', (els) =>
          els.map((e) => [e.getAttribute("data-role"), e.querySelector(".text")?.textContent]),
        );
        expect(entries).toEqual([
          ["user", "hello there"],
          ["assistant", "Echo: hello there"],
        ]);
        await turnCompleted();
        await page.getByRole("button", { name: "Send" }).waitFor();
        // Usable widths: the composer and the reply take most of the screen.
        const composer = await page.getByRole("textbox", { name: "Message" }).boundingBox();
        expect(composer?.width ?? 0).toBeGreaterThan(size.phone ? 250 : 400);
        const bubble = await page
          .locator('[data-testid="chat-entry"][data-role="assistant"] .bubble')
          .boundingBox();
        expect(bubble?.width ?? 0).toBeGreaterThan(120);
        // The session list names it by its first message and its agent.
        await showSessions();
        const row = page.locator('[data-testid="session-list"] [aria-current="page"]');
        await expect.poll(() => row.textContent()).toContain("hello there");
        expect(await row.textContent()).toContain("Echo assistant");
        // Search narrows the list to the sessions that match.
        const search = page.getByRole("searchbox", { name: "Search sessions" });
        await search.fill("hello there");
        const rows = page.locator('[data-testid="session-list"] li');
        await expect
          .poll(async () => (await rows.allTextContents()).every((t) => t.includes("hello there")))
          .toBe(true);
        expect(await rows.count()).toBeGreaterThanOrEqual(1);
        await search.fill("no such session anywhere");
        await page.getByText("No session matches").waitFor();
        await search.fill("");
        // The agent picker kept the choice across a reload.
        await page.reload();
        await showSessions();
        await expect.poll(() => page.getByLabel("Agent", { exact: true }).inputValue()).toBe(echo);
        await noHorizontalOverflow();
        await shot("reply-rendered");
        noConsoleErrors();
      });

      it("renders markdown safely: lists and code, never raw HTML", async () => {
        const sessionId = await openNewSession(echo);
        const text =
          "**Plan**\n\n- one\n- two\n\n```\ncode()\n```\n\n<img src=x onerror=alert(1)><script>alert(2)</script>[link](javascript:alert(3))";
        const added = await api.post(`/v1/sessions/${sessionId}/messages`, {
          message: { role: "assistant", parts: [{ type: "text", text }] },
        });
        expect(added.status, added.text).toBeLessThan(300);
        const reply = page.locator('[data-testid="chat-entry"][data-role="assistant"] .text');
        await reply.waitFor();
        expect(await reply.locator("strong").textContent()).toBe("Plan");
        expect(await reply.locator("li").count()).toBe(2);
        expect(await reply.locator("pre code").textContent()).toContain("code()");
        expect(await reply.locator("img, script").count()).toBe(0);
        expect(await reply.textContent()).toContain("<img src=x onerror=alert(1)>");
        const href = await reply
          .locator("a")
          .first()
          .getAttribute("href")
          .catch(() => null);
        expect(href ?? "").not.toContain("javascript:");
        await noHorizontalOverflow();
        noConsoleErrors();
      });

      it("streams the reply as it is written", async () => {
        const sessionId = await openNewSession(streamer);
        const full = `Streaming reply to tokens please: ${STREAMED_TAIL}`;
        // Record every text the assistant's reply shows while it grows: the
        // streaming preview, then the confirmed message.
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
        await turnCompleted();
        await page.waitForSelector('[data-testid="streaming"]', { state: "detached" });
        expect(await texts('[data-testid="chat-entry"] .text')).toEqual(["tokens please", full]);
        const seen = await page.evaluate<string[]>("window.__replyTexts");
        expect(seen.at(-1)).toBe(full);
        const partial = seen.slice(0, -1);
        // The reply grew through several partial texts, each a prefix of the next.
        expect(partial.length).toBeGreaterThanOrEqual(2);
        for (const [i, text] of partial.entries()) {
          expect(text.length).toBeLessThan(full.length);
          expect((seen[i + 1] ?? "").startsWith(text)).toBe(true);
        }
        if (!size.phone) {
          // On the wire: token envelopes carry the reply in pieces, all before its response.
          const stream = await api.stream(`/v1/ui/sessions/${sessionId}/events/stream`);
          const frames = await readUiFrames(stream, (f) => f.type === "turn_end");
          stream.close();
          const responseAt = frames.findIndex((f) => f.type === "response");
          const tokens = frames.filter((f) => f.type === "token");
          expect(tokens.length).toBeGreaterThanOrEqual(2);
          expect(frames.findLastIndex((f) => f.type === "token")).toBeLessThan(responseAt);
          expect(tokens.map((f) => f.payload.text).join("")).toBe(full);
        }
        noConsoleErrors();
      });

      it("stops a running turn with Stop (the real cancel)", async () => {
        const sessionId = await openNewSession(echo);
        await send("take your time");
        await page.waitForSelector('[data-testid="status"][data-status="running"]');
        await press(page.getByRole("button", { name: "Stop" }));
        await page.waitForSelector('[data-testid="turn-status"][data-turn-status="canceled"]');
        await page.getByRole("button", { name: "Send" }).waitFor();
        // Said calmly, not as an error.
        await page.getByTestId("turn-stopped").waitFor();
        expect(await page.getByTestId("turn-error").count()).toBe(0);
        await shot("stopped");
        // The task was canceled on the server, and no reply came.
        const tasks = await api.get(`/v1/sessions/${sessionId}/tasks`);
        expect(tasks.json.data.map((t: { status: string }) => t.status.toLowerCase())).toEqual([
          "canceled",
        ]);
        expect(await texts('[data-testid="chat-entry"] .text')).toEqual(["take your time"]);
        noConsoleErrors();
      });

      it("shows tool calls in place and approves the gated one with its arguments visible", async () => {
        await openNewSession(gated);
        await send("Paris");
        await page.waitForSelector(
          '[data-testid="tool-row"][data-tool-call-id="call_1"][data-status="ok"]',
        );
        const waiting = page.locator(
          '[data-testid="tool-row"][data-tool-call-id="call_2"][data-status="awaiting_approval"]',
        );
        await waiting.waitFor();
        expect(await waiting.getByTestId("tool-state").textContent()).toBe("awaiting approval");
        const card = page.getByRole("region", { name: /Approval needed to run write_file/ });
        await card.waitFor();
        // The operator sees what they approve.
        const args = card.getByTestId("approval-arguments");
        expect(JSON.parse((await args.textContent()) ?? "")).toEqual({ path: "forecast.txt" });
        expect(await args.isVisible()).toBe(true);
        // No internal ids outside the debug tier.
        expect(await page.locator(".chat-column").textContent()).not.toMatch(
          /task_|:approval|call_2/,
        );
        await page.waitForSelector('[data-testid="status"][data-status="awaiting_approval"]');
        const approve = card.getByRole("button", { name: "Approve" });
        expect(await approve.isVisible()).toBe(true);
        if (!size.phone) {
          // The session view as the README shows it.
          await page.screenshot({ path: join(screenshots, "session-view.png") });
        }
        await axeScan("approval");
        await noHorizontalOverflow();
        await shot("approval-pending");
        // Dark (prefers-color-scheme) reads as well.
        await page.emulateMedia({ colorScheme: "dark" });
        await axeScan("approval (dark)");
        await shot("approval-pending-dark");
        await page.emulateMedia({ colorScheme: "light" });
        if (size.phone) {
          await approve.tap();
        } else {
          // Reachable by keyboard.
          await approve.focus();
          await page.keyboard.press("Enter");
        }
        await page.waitForSelector(
          '[data-testid="tool-row"][data-tool-call-id="call_2"][data-status="ok"]',
        );
        await turnCompleted();
        await page.waitForSelector('[data-testid="approval"]', { state: "detached" });
        const replies = await texts('[data-testid="chat-entry"][data-role="assistant"] .text');
        expect(replies.at(-1)).toBe("Done: the forecast is in forecast.txt.");
        // Tool rows sit between the messages, in order, each with a duration and result.
        const order = await page.$$eval(".msg-list > li", (els) =>
          els.map((e) => e.getAttribute("data-tool-call-id") ?? e.getAttribute("data-role")),
        );
        expect(order).toEqual(["user", "assistant", "call_1", "assistant", "call_2", "assistant"]);
        expect(
          await page
            .locator('[data-tool-call-id="call_1"] [data-testid="tool-result"]')
            .textContent(),
        ).toBe("sunny, 21°C");
        await page.locator('[data-tool-call-id="call_2"] [data-testid="tool-duration"]').waitFor();
        await axeScan("session");
        await noHorizontalOverflow();
        await shot("approved-and-finished");

        // Receipts: a count, and a verification from the panel.
        await page.getByRole("button", { name: /^(Panels|Hide panels)$/ }).waitFor();
        const panels = page.getByRole("button", { name: "Panels", exact: true });
        if ((await panels.count()) > 0) await press(panels);
        await press(page.getByRole("tab", { name: /Receipts/ }));
        await page
          .getByTestId("receipt-count")
          .filter({ hasText: /receipt/ })
          .waitFor({ timeout: 30_000 });
        await expect
          .poll(() => page.getByTestId("receipt-count").textContent(), { timeout: 30_000 })
          .toMatch(/^\d+ receipts?$/);
        await press(page.getByRole("button", { name: "Verify all" }));
        await page.getByTestId("verification").first().waitFor({ state: "attached" });
        await expect
          .poll(() => page.locator(".receipts-line").textContent())
          .toMatch(/verified valid/);
        await page.locator(".receipt-details summary").click();
        expect(await page.getByTestId("verification").first().textContent()).toBe("valid");
        await noHorizontalOverflow();
        await shot("receipts");
        if (size.phone) await press(page.getByRole("button", { name: "Close panels" }));
        noConsoleErrors();
      });

      it("denies a gated tool with its arguments visible: the row ends denied", async () => {
        await openNewSession(gated);
        await send("Oslo");
        const card = page.getByRole("region", { name: /Approval needed to run write_file/ });
        await card.waitFor();
        expect(await card.getByTestId("approval-arguments").textContent()).toContain(
          "forecast.txt",
        );
        await press(card.getByRole("button", { name: "Deny" }));
        await page.waitForSelector(
          '[data-testid="tool-row"][data-tool-call-id="call_2"][data-status="denied"]',
        );
        await turnCompleted();
        expect(
          (await texts('[data-testid="chat-entry"][data-role="assistant"] .text')).at(-1),
        ).toBe("Understood, I did not write it.");
        await shot("denied");
        noConsoleErrors();
      });

      it("reloads mid-turn and loses or doubles nothing", async () => {
        const sessionId = await secondTurnSent("first", "second");
        // Reload while the second turn runs (the agent takes 2.5 s).
        await page.waitForSelector('[data-testid="status"][data-status="running"]');
        await page.reload();
        await page.waitForSelector('[data-testid="status"]');
        await shot("reloaded-mid-turn");
        await countIs('[data-testid="chat-entry"][data-role="assistant"]', 2);
        await page.waitForSelector('[data-testid="status"][data-status="idle"]');
        expect(await texts('[data-testid="chat-entry"] .text')).toEqual([
          "first",
          "Echo: first",
          "second",
          "Echo: second",
        ]);
        // What the page applied is exactly what the server's stream holds, once each.
        const applied = await page.evaluate<Applied | undefined>("window.__trellisUi");
        expect(applied?.sessionId).toBe(sessionId);
        await appliedAsServed(sessionId, applied);
        noConsoleErrors();
      });

      it("opens a 200-message session at its latest message, and jumps back after scrolling up", async () => {
        const made = await api.post("/v1/sessions", { persona_id: echo });
        expect(made.status, made.text).toBe(201);
        const id = made.json.id as string;
        for (let i = 1; i <= 200; i += 1) {
          const role = i % 2 === 1 ? "user" : "assistant";
          const added = await api.post(`/v1/sessions/${id}/messages`, {
            message: { role, parts: [{ type: "text", text: `message ${i} of 200` }] },
          });
          expect(added.status, added.text).toBeLessThan(300);
        }
        await page.goto(`${base}/ui/#/sessions/${encodeURIComponent(id)}`);
        await countIs('[data-testid="chat-entry"]', 200);
        const last = page.locator('[data-testid="chat-entry"]').last();
        // The latest message is in view without scrolling, the first is not.
        await expect.poll(() => last.isVisible()).toBe(true);
        const inView = (selector: string) =>
          page.evaluate<boolean>(`(() => {
            const el = document.querySelector(${JSON.stringify(selector)});
            const box = document.querySelector('[data-testid="transcript"]').getBoundingClientRect();
            const r = el.getBoundingClientRect();
            return r.top < box.bottom && r.bottom > box.top;
          })()`);
        await expect.poll(() => inView('[data-testid="chat-entry"]:last-of-type')).toBe(true);
        expect(await inView('[data-testid="chat-entry"]:first-of-type')).toBe(false);
        expect(await last.textContent()).toContain("message 200 of 200");
        // The page itself never scrolls: header and composer stay put.
        expect(await page.evaluate<number>("document.scrollingElement.scrollTop")).toBe(0);
        expect(await page.getByRole("textbox", { name: "Message" }).isVisible()).toBe(true);
        await shot("long-session");
        // One wheel gesture up, as an operator scrolls: the view stops
        // following at the input itself, so a re-render landing before the
        // scroll event (the stream's updates) cannot pin it back.
        const jump = page.getByRole("button", { name: /Jump to latest/ });
        const box = await page.locator('[data-testid="transcript"]').boundingBox();
        expect(box).not.toBeNull();
        await page.mouse.move(box!.x + box!.width / 2, box!.y + box!.height / 2);
        await page.mouse.wheel(0, -3000);
        await expect.poll(() => jump.isVisible()).toBe(true);
        await expect.poll(() => inView('[data-testid="chat-entry"]:last-of-type')).toBe(false);
        await press(jump);
        await expect.poll(() => inView('[data-testid="chat-entry"]:last-of-type')).toBe(true);
        await noHorizontalOverflow();
        noConsoleErrors();
      });

      it("branches from an earlier message by tap into a new session with the earlier history", async () => {
        const parent = await secondTurnSent("one", "two");
        await countIs('[data-testid="chat-entry"][data-role="assistant"]', 2);
        const firstReply = page
          .locator('[data-testid="chat-entry"][data-role="assistant"]')
          .first();
        // "Branch" is a visible button: no hover needed.
        const branch = firstReply.getByRole("button", { name: "Branch from this message" });
        expect(await branch.isVisible()).toBe(true);
        await press(branch);
        await expect
          .poll(() => new URL(page.url()).hash)
          .toMatch(new RegExp(`^#/sessions/(?!${parent}$)`));
        await countIs('[data-testid="inherited-entry"]', 2);
        expect(await texts('[data-testid="inherited-entry"] .text')).toEqual(["one", "Echo: one"]);
        await page.waitForSelector('[data-testid="marker"][data-kind="resume_seed"]');
        // Internal ids stay in the debug tier.
        expect(await page.locator(".chat-column").textContent()).not.toMatch(/ses_|evt_|task_/);
        await shot("branched");
        await page.waitForSelector('[data-testid="status"][data-status="active"]');
        await send("three");
        await page.waitForSelector('[data-testid="chat-entry"][data-role="assistant"]');
        expect(
          await page.textContent('[data-testid="chat-entry"][data-role="assistant"] .text'),
        ).toBe("Echo: three");
        // The branch's agent saw the inherited history, not the parent's later turn.
        const branchId = await currentSession();
        const messages = await api.get(`/v1/sessions/${branchId}/messages`);
        const sent = messages.json.data.map((m: { parts: { text?: string }[] }) =>
          m.parts.map((p) => p.text ?? "").join(""),
        );
        expect(sent).toEqual(["one", "Echo: one", "three", "Echo: three"]);
        await noHorizontalOverflow();
        await shot("branch-continued");
        noConsoleErrors();
      });

      if (size.phone) return;

      it("lists resume points calmly and branches a new session from the approval request", async () => {
        const parent = await openNewSession(gated);
        await send("Lyon");
        await page.getByRole("button", { name: "Approve" }).click();
        await turnCompleted();
        await page.getByRole("tab", { name: "Resume" }).click();
        await countIs('[data-testid="resume-point"]', 3);
        const kinds = await page.$$eval('[data-testid="resume-point"]', (els) =>
          els.map((e) => e.getAttribute("data-kind")),
        );
        expect(kinds).toEqual(["approval_request", "approval_resolution", "turn_completed"]);
        // No "turn completed turn completed: …".
        const words = await texts('[data-testid="resume-point"]');
        for (const w of words) expect(w.toLowerCase()).not.toMatch(/(\w+ \w+) \1/);
        await shot("resume-points");
        await page
          .locator('[data-testid="resume-point"][data-kind="approval_request"]')
          .getByRole("button", { name: /^Branch from/ })
          .click();
        await expect
          .poll(() => new URL(page.url()).hash)
          .toMatch(new RegExp(`^#/sessions/(?!${parent}$)`));
        await page.waitForSelector('[data-testid="marker"][data-kind="resume_seed"]');
        const branchId = await currentSession();
        const messages = await api.get(`/v1/sessions/${branchId}/messages`);
        const sent = messages.json.data.map((m: { parts: { text?: string }[] }) =>
          m.parts.map((p) => p.text ?? "").join(""),
        );
        expect(sent.at(-1)).toBe("It is sunny. May I write the forecast to a file?");
        expect(sent).not.toContain("Done: the forecast is in forecast.txt.");
        noConsoleErrors();
      });

      it("shows health calmly: only the flags that are on, or all clear", async () => {
        await openNewSession(echo);
        await page.getByRole("tab", { name: "Health" }).click();
        const health = page.getByTestId("health");
        await expect.poll(() => health.getAttribute("data-status")).not.toBe("");
        const flags = await page.locator('[data-testid="health"] .flag').count();
        if (flags === 0) {
          expect(await page.getByTestId("health-clear").textContent()).toBe("All clear");
        }
        expect(await health.textContent()).not.toMatch(/stuck|budget pressure/);
        noConsoleErrors();
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
        expect(await texts('[data-testid="chat-entry"] .text')).toEqual(["alpha", "Echo: alpha"]);
        const applied = await page.evaluate<Applied | undefined>("window.__trellisUi");
        const cursors = applied?.cursors ?? [];
        const resumedAt = cursors.indexOf(applied?.resumeCursor ?? "");
        expect(resumedAt).toBeGreaterThanOrEqual(cursors.indexOf(before?.cursors.at(-1) ?? ""));
        expect(resumedAt).toBeGreaterThanOrEqual(0);
        await appliedAsServed(sessionId, applied);
        // A dropped connection is the network's error, not the page's.
        consoleErrors = consoleErrors.filter((e) => !/ERR_|network|Failed to fetch/i.test(e));
        noConsoleErrors();
      });

      it("switches to the debug tier and shows internal ids and the debug-only envelopes", async () => {
        await page.getByRole("checkbox", { name: "Debug" }).check();
        await page.waitForSelector('[data-testid="debug-log"]');
        await page
          .locator('[data-testid="debug-log"] strong', { hasText: "turn_start" })
          .first()
          .waitFor();
        expect(await page.locator(".session-sub .debug-id").textContent()).toContain("ses_");
        await shot("debug-tier");
        await page.getByRole("checkbox", { name: "Debug" }).uncheck();
        await page.waitForSelector('[data-testid="debug-log"]', { state: "detached" });
        noConsoleErrors();
      });
    });
  }
});
