/**
 * Safe markdown for assistant messages: `marked` renders GitHub-flavoured
 * markdown (code blocks, lists, links, tables), raw HTML in the source is
 * shown as text (never interpreted), and DOMPurify sanitizes the result
 * (no scripts, event handlers or `javascript:` links). Links open in a new
 * tab without a referrer.
 */
import DOMPurify from "dompurify";
import { Marked } from "marked";

const escapes: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => escapes[c] ?? c);
}

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    // Raw HTML blocks and inline tags are text, not markup.
    html(token) {
      return escapeHtml(token.text);
    },
  },
});

let hooked = false;

/** The sanitized HTML of `source`. */
export function markdownHtml(source: string): string {
  if (!hooked) {
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A") {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
    hooked = true;
  }
  const html = marked.parse(source, { async: false });
  return DOMPurify.sanitize(html.trim(), {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["style", "form", "input", "button", "img"],
    FORBID_ATTR: ["style"],
  });
}

/** A markdown block. */
export function Markdown({ source, class: className }: { source: string; class?: string }) {
  return (
    <div
      class={`md ${className ?? ""}`}
      dangerouslySetInnerHTML={{ __html: markdownHtml(source) }}
    />
  );
}
