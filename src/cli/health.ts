import { DEFAULT_PORTS, urlVariable } from "@trellis/platform";
import { checkHealth } from "../mesh.js";

interface Row {
  name: string;
  url: string;
  status: string;
  ms: string;
}

function targets(
  source: NodeJS.ProcessEnv,
  urls: readonly string[],
): { name: string; url: string }[] {
  if (urls.length > 0) return urls.map((url) => ({ name: url, url }));
  const configured = Object.keys(DEFAULT_PORTS).flatMap((name) => {
    const url = source[urlVariable(name)];
    return url ? [{ name, url }] : [];
  });
  if (configured.length > 0) return configured;
  const port = source.TRELLIS_PORT ?? "8080";
  return [{ name: "trellis (embedded)", url: `http://127.0.0.1:${port}` }];
}

/** `trellis health`: one row per service; exit code 1 unless all are SERVING. */
export async function runHealth(
  source: NodeJS.ProcessEnv,
  urls: readonly string[],
): Promise<number> {
  const rows: Row[] = await Promise.all(
    targets(source, urls).map(async ({ name, url }) => {
      const started = performance.now();
      try {
        const status = await checkHealth(url);
        return { name, url, status, ms: (performance.now() - started).toFixed(1) };
      } catch (error) {
        const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
        return { name, url, status: `UNREACHABLE (${reason})`, ms: "-" };
      }
    }),
  );
  const header: Row = { name: "SERVICE", url: "URL", status: "STATUS", ms: "MS" };
  const width = (key: keyof Row) => Math.max(...[header, ...rows].map((r) => r[key].length));
  const line = (r: Row) =>
    `${r.name.padEnd(width("name"))}  ${r.url.padEnd(width("url"))}  ${r.ms.padStart(width("ms"))}  ${r.status}`;
  process.stdout.write(`${[header, ...rows].map(line).join("\n")}\n`);
  return rows.every((r) => r.status === "SERVING") ? 0 : 1;
}
