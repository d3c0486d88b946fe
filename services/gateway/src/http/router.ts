/**
 * A small path router for the REST surface: `/v1/sessions/{session_id}`
 * patterns, exact segment matching, 404 for unknown paths and 405 (with
 * `Allow`) for a known path with another method.
 */

/** One compiled route pattern. */
interface Pattern {
  segments: readonly ({ literal: string } | { param: string })[];
}

function compile(pattern: string): Pattern {
  return {
    segments: pattern
      .split("/")
      .filter((s) => s !== "")
      .map((s) =>
        s.startsWith("{") && s.endsWith("}") ? { param: s.slice(1, -1) } : { literal: s },
      ),
  };
}

/** Result of {@link Router.match}. */
export type RouteMatch<R> =
  | { kind: "found"; route: R; params: Record<string, string> }
  | { kind: "method_not_allowed"; allow: string[] }
  | { kind: "not_found" };

/** Routes by method and path pattern. */
export class Router<R extends { method: string; path: string; notServed?: boolean }> {
  private readonly routes: { route: R; pattern: Pattern }[];

  constructor(routes: readonly R[]) {
    this.routes = routes.map((route) => ({ route, pattern: compile(route.path) }));
  }

  match(method: string, pathname: string): RouteMatch<R> {
    const parts = pathname.split("/").filter((s) => s !== "");
    const allow = new Set<string>();
    for (const { route, pattern } of this.routes) {
      const params = matchSegments(pattern, parts);
      if (params === undefined) continue;
      if (route.method === method || (method === "HEAD" && route.method === "GET")) {
        return { kind: "found", route, params };
      }
      // A method answered only with 501 is not offered (Allow, CORS preflight).
      if (!route.notServed) allow.add(route.method);
    }
    if (allow.size > 0) return { kind: "method_not_allowed", allow: [...allow].sort() };
    return { kind: "not_found" };
  }
}

function matchSegments(
  pattern: Pattern,
  parts: readonly string[],
): Record<string, string> | undefined {
  if (pattern.segments.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const segment = pattern.segments[i]!;
    const part = parts[i]!;
    if ("literal" in segment) {
      if (segment.literal !== part) return undefined;
    } else {
      let value: string;
      try {
        value = decodeURIComponent(part);
      } catch {
        return undefined;
      }
      if (value === "") return undefined;
      params[segment.param] = value;
    }
  }
  return params;
}
