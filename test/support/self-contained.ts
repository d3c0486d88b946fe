/**
 * Finds places where a tracked file reads, or points to, something outside
 * the checkout. CI runs in a fresh clone with nothing beside it, so a test or
 * script that reaches for a folder beside the checkout, a machine path
 * (`/work/…`, a home directory) or an undocumented spec-location variable
 * passes on one machine and fails everywhere else.
 *
 * Two rules:
 * - **Escaping relative paths** (TypeScript/JavaScript string literals, and
 *   Markdown links): a literal that starts with `../` and, resolved from the
 *   file's own folder (how `new URL(…, import.meta.url)` and imports resolve),
 *   lands outside the repository root.
 * - **Known outside locations** (string literals and `process.env.…`
 *   names in code; every line of scripts and config; Markdown too, minus
 *   machine paths in recorded output): the sibling `shared` folder and its
 *   `shared/spec`, the spec-folder variable an old test read (see
 *   {@link OUTSIDE}), `/work/`, `/home/<user>`, `/Users/`.
 *
 * Comments in code are not reads and are not checked.
 */
import { posix } from "node:path";
import ts from "typescript";

/** One place that reaches outside the checkout. */
export interface Escape {
  /** Repository-relative path of the file. */
  file: string;
  /** 1-based line. */
  line: number;
  /** The literal or line that escapes. */
  text: string;
  /** Which rule it broke. */
  rule: "escapes-root" | "outside-location";
}

const CODE = /\.(ts|tsx|mts|cts|js|mjs|cjs)$/;
const MARKDOWN = /\.md$/;

// Spelled in parts so that this file, which only names them, holds none of
// the strings a plain text search for outside reads looks for.
const SIBLING = "shared";
const SPEC_VARIABLE = ["TRELLIS", "SPEC", "DIR"].join("_");

/** Names of places outside a checkout that no tracked file may use. */
const OUTSIDE: readonly RegExp[] = [
  new RegExp(String.raw`\.\.\/${SIBLING}\b`),
  /\bshared\/spec\b/,
  new RegExp(String.raw`\b${SPEC_VARIABLE}\b`),
  /(^|[^\w.-])\/work\//,
  /(^|[^\w.-])\/home\/[\w.-]+/,
  /(^|[^\w.-])\/Users\//,
];
/** Markdown also records benchmark output naming the trees it compared. */
const OUTSIDE_IN_MARKDOWN = OUTSIDE.slice(0, 3);

/** Whether `literal`, resolved from the folder of `file`, leaves the root. */
export function escapesRoot(file: string, literal: string): boolean {
  if (!literal.startsWith("../")) return false;
  const resolved = posix.normalize(posix.join(posix.dirname(file), literal));
  return resolved === ".." || resolved.startsWith("../");
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

function checkLiteral(
  file: string,
  line: number,
  literal: string,
  patterns: readonly RegExp[],
  out: Escape[],
): void {
  if (escapesRoot(file, literal)) out.push({ file, line, text: literal, rule: "escapes-root" });
  else if (patterns.some((p) => p.test(literal)))
    out.push({ file, line, text: literal, rule: "outside-location" });
}

function scanCode(file: string, text: string, out: Escape[]): void {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const visit = (node: ts.Node): void => {
    if (
      ts.isStringLiteral(node) ||
      ts.isNoSubstitutionTemplateLiteral(node) ||
      ts.isTemplateHead(node) ||
      ts.isTemplateMiddle(node) ||
      ts.isTemplateTail(node)
    ) {
      checkLiteral(file, lineOf(text, node.getStart(source)), node.text, OUTSIDE, out);
    } else if (ts.isIdentifier(node) && OUTSIDE.some((p) => p.test(node.text))) {
      // An environment variable naming a spec location kept outside the checkout.
      const line = lineOf(text, node.getStart(source));
      out.push({ file, line, text: node.text, rule: "outside-location" });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

function scanMarkdown(file: string, text: string, out: Escape[]): void {
  text.split("\n").forEach((content, i) => {
    for (const link of content.matchAll(/\]\(([^)\s#]+)/g)) {
      const target = link[1] ?? "";
      if (escapesRoot(file, target))
        out.push({ file, line: i + 1, text: target, rule: "escapes-root" });
    }
    if (OUTSIDE_IN_MARKDOWN.some((p) => p.test(content)))
      out.push({ file, line: i + 1, text: content.trim(), rule: "outside-location" });
  });
}

function scanLines(file: string, text: string, out: Escape[]): void {
  text.split("\n").forEach((content, i) => {
    // Shell, YAML and Dockerfile comments start with `#`; a `#` inside a word stays.
    const code = content.replace(/(^|\s)#.*$/, "");
    if (OUTSIDE.some((p) => p.test(code)))
      out.push({ file, line: i + 1, text: content.trim(), rule: "outside-location" });
  });
}

/** Every place in one file (repository-relative `file`) that reaches outside the checkout. */
export function findEscapes(file: string, text: string): Escape[] {
  const out: Escape[] = [];
  if (CODE.test(file)) scanCode(file, text, out);
  else if (MARKDOWN.test(file)) scanMarkdown(file, text, out);
  else scanLines(file, text, out);
  return out;
}
