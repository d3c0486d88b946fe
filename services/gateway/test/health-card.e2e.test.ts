// The operator UI's health card end to end: Debian's Chromium (playwright-core)
// against an embedded Trellis; the card follows the session's health stream
// from healthy to stuck (a slow turn past `stuck_after_seconds`) and back.
// A screenshot of each state goes to .ci-out/screenshots. Skipped, saying
// so, only when Chromium is absent.
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { harnClient } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { buildUiIfStale, chromiumPath, screenshots } from "./support/browser.js";
import { ADMIN_KEY } from "./support/conformance.js";
import { createScriptedAgent, echoAgent } from "./support/ui-fixtures.js";

describe.skipIf(!chromiumPath)("the operator UI's health card (Chromium)", () => {
  let trellis: EmbeddedTrellis;
  let context: BrowserContext;
  let page: Page;
  let profile: string;

  beforeAll(async () => {
    await buildUiIfStale();
    await mkdir(screenshots, { recursive: true });
    trellis = await startEmbedded({
      services: [gatewayService, tasksService],
      port: 0,
      env: { TRELLIS_API_KEY: ADMIN_KEY, TRELLIS_LOG_LEVEL: "error" },
      logger: createLogger({ service: "e2e", level: "error" }),
    });
    profile = await mkdtemp(join(tmpdir(), "trellis-chromium-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath!,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
      viewport: { width: 1360, height: 900 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(20_000);
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await trellis?.close({ graceMs: 500 });
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  it("shows healthy, then stuck while a slow turn records nothing, then healthy again", async () => {
    const api = harnClient(trellis.address.url, ADMIN_KEY);
    const slow = await createScriptedAgent(api, "slow", echoAgent(3000));
    const session = await api.post("/v1/sessions", {
      persona_id: slow,
      metadata: { health_policy: { stuck_after_seconds: 1 } },
    });
    const id = session.json.id as string;

    await page.goto(`${trellis.address.url}/ui`);
    await page.fill('[data-testid="login-key"]', ADMIN_KEY);
    await page.click('[data-testid="login-submit"]');
    await page.waitForSelector('[data-testid="session-list"]', { state: "attached" });
    await page.goto(`${trellis.address.url}/ui#/sessions/${encodeURIComponent(id)}`);
    await page.waitForSelector('[data-testid="health"][data-status="healthy"]');
    expect(await page.getAttribute('[data-testid="health"]', "data-score")).toBe("100");
    await page.screenshot({ path: join(screenshots, "health-1-healthy.png"), fullPage: true });

    await api.post(`/v1/sessions/${id}/tasks`, { input: "slowly" });
    await page.waitForSelector('[data-testid="health"] [data-flag="stuck"][data-on="true"]');
    expect(await page.getAttribute('[data-testid="health"]', "data-score")).toBe("60");
    expect(await page.textContent('[data-testid="health"]')).toContain("has recorded nothing");
    await page.screenshot({ path: join(screenshots, "health-2-stuck.png"), fullPage: true });

    // Calm: a flag that went off is no longer listed.
    await page.waitForSelector('[data-testid="health"] [data-flag="stuck"]', { state: "detached" });
    await page.waitForSelector('[data-testid="health"][data-status="healthy"]');
    await page.screenshot({ path: join(screenshots, "health-3-recovered.png"), fullPage: true });
  }, 60_000);
});
