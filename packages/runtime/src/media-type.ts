/**
 * Media types a caller names (an artifact's `mime_type`): the `type/subtype`
 * token grammar of RFC 9110 §8.3.1 with optional `; name=value` parameters,
 * nothing else. A value that passes can go into a `Content-Type` header as it
 * is: no CR, LF or other control character, no header injection.
 */

// tchar of RFC 9110 §5.6.2.
const token = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
// A quoted-string without control characters (HTAB allowed, as the RFC does).
const quoted = '"(?:[\\t\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\t\\x20-\\x7e])*"';
const mediaTypePattern = new RegExp(
  `^${token}/${token}(?:[ \\t]*;[ \\t]*${token}=(?:${token}|${quoted}))*$`,
);

/** Longest media type accepted (RFC 6838 bounds names at 127 characters each). */
export const MAX_MEDIA_TYPE_LENGTH = 255;

/** Whether `value` is a well-formed media type (`type/subtype[; param=value]…`). */
export function isValidMediaType(value: string): boolean {
  return value.length <= MAX_MEDIA_TYPE_LENGTH && mediaTypePattern.test(value);
}
