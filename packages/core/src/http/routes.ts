import { FloodgateError } from "../errors.ts";

// Rule patterns: "METHOD /path" compiled once, ordered by specificity, matched per request
// against the path as the frameworks route it.

/** A compiled `"METHOD /path"` pattern. */
export interface RoutePattern {
  /** The pattern as written, e.g. `"GET /api/orders/:id"`. */
  readonly source: string;
  /** Upper-case method, or `undefined` for any method. */
  readonly method: string | undefined;
  readonly regex: RegExp;
  /** Sort key: higher is more specific. */
  readonly rank: readonly number[];
}

/**
 * The methods a rule may name: RFC 9110's, PATCH, QUERY and the WebDAV and other methods Node's
 * HTTP parser accepts (and so Express and Koa route). A misspelt one (`"GETT"`) would match no
 * request, leaving its route uncounted.
 */
const METHODS = new Set(
  ("GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE PATCH QUERY ACL BIND CHECKOUT COPY LINK LOCK M-SEARCH MERGE MKACTIVITY " +
    "MKCALENDAR MKCOL MOVE NOTIFY PROPFIND PROPPATCH PURGE REBIND REPORT SEARCH SOURCE SUBSCRIBE UNBIND UNLINK UNLOCK UNSUBSCRIBE").split(
      " ",
    ),
);
const SEGMENT = /^(?:\*|:[A-Za-z_][A-Za-z0-9_]*|[^*:/{}]+)$/;

const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The path of a raw request-target (Node's `req.url`) as servers route it: origin-form (`/a?q`)
 * without its query; absolute-form (`http://host/a`, which Node passes on as is and Express and
 * Koa route by its path) without scheme and authority; a fragment (`/a#x`, which they also
 * ignore) dropped. For adapters whose framework hands over the raw target.
 */
export function targetPath(target: string): string {
  // One pass to the first `?` or `#`, rather than a regex or two searches: this runs on every request.
  let end = 0;
  while (end < target.length) {
    const c = target.charCodeAt(end);
    if (c === 63 || c === 35) break;
    end++;
  }
  const p = end === target.length ? target : target.slice(0, end);
  return p.charCodeAt(0) === 47 ? p : p.replace(ABSOLUTE_FORM, "");
}

/** Strips the query, then normalises the path as {@link normalizeRoutePath} does. */
export function normalizePath(path: string, caseSensitive: boolean): string {
  const q = path.indexOf("?");
  return normalizeRoutePath(q === -1 ? path : path.slice(0, q), caseSensitive);
}

/** The form rules match a path (without query) in: percent-escapes decoded where safe, `//` collapsed, no trailing `/`. */
export function normalizeRoutePath(path: string, caseSensitive: boolean): string {
  let p = path;
  if (p.includes("%")) {
    try {
      p = decodeURI(p);
    } catch {
      // Malformed escapes: match the raw text.
    }
  }
  if (p.includes("//")) p = p.replace(/\/{2,}/g, "/");
  if (p.length > 1 && p.endsWith("/")) p = p.slice(0, -1);
  if (p[0] !== "/") p = `/${p}`;
  return caseSensitive ? p : p.toLowerCase();
}

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Compiles `"GET /api/orders/:id"`, `"POST /login"`, `"* /api/*"` or `"/api/*"` (any method).
 * `:name` matches one non-empty segment; `*` one segment, or as the last segment any rest
 * (including none).
 */
export function compilePattern(source: string, caseSensitive: boolean): RoutePattern {
  const text = source.trim();
  const space = text.indexOf(" ");
  const methodText = space === -1 ? "*" : text.slice(0, space);
  const pathText = text.slice(space + 1).trim();
  const invalid = (why: string): FloodgateError =>
    new FloodgateError(
      "INVALID_OPTION",
      `invalid rule ${
        JSON.stringify(source)
      }: ${why}; expected "METHOD /path" (or "/path" for any method) where a segment is literal text (without *, :, { or }), ":name" or "*", or "default".`,
    );
  if (methodText !== "*" && !METHODS.has(methodText.toUpperCase())) {
    throw invalid(`method ${JSON.stringify(methodText)} is not an HTTP method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS...) or *`);
  }
  if (pathText[0] !== "/") throw invalid("the path must start with /");
  // Normalised, the path has no empty segment (the root has none at all).
  const path = normalizePath(pathText, true);
  const segments = path === "/" ? [] : path.slice(1).split("/");
  let regex = segments.length === 0 ? "^/" : "^";
  const rank: number[] = segments.map((segment, i) => {
    // Braces cannot be part of a store prefix (Redis hash tags); "{id}" is usually meant as ":id".
    if (!SEGMENT.test(segment)) throw invalid(`segment ${JSON.stringify(segment)} is invalid`);
    if (segment === "*") {
      const last = i === segments.length - 1;
      regex += last ? "(?:/.*)?" : "/[^/]+";
      return last ? 0 : 2;
    }
    if (segment[0] === ":") {
      regex += "/[^/]+";
      return 3;
    }
    regex += `/${escapeRegex(caseSensitive ? segment : segment.toLowerCase())}`;
    return 4;
  });
  // The end of a path without a trailing * ranks above that *: "/api" beats "/api/*" for "/api".
  if (segments[segments.length - 1] !== "*") rank.push(1);
  const method = methodText === "*" ? undefined : methodText.toUpperCase();
  // A method beats any method; HEAD beats GET, the one other method that matches a HEAD request.
  rank.push(method === undefined ? 0 : method === "HEAD" ? 2 : 1);
  return { source, method, regex: new RegExp(`${regex}$`), rank };
}

/** Orders patterns most specific first: per segment literal > :param > * > the path's end > trailing *, then with a method. */
export function compareSpecificity(a: RoutePattern, b: RoutePattern): number {
  const n = Math.max(a.rank.length, b.rank.length);
  for (let i = 0; i < n; i++) {
    const x = a.rank[i] ?? -1;
    const y = b.rank[i] ?? -1;
    if (x !== y) return y - x;
  }
  return 0;
}

/**
 * True when the pattern matches a method and an already-normalised path. A GET pattern also
 * matches HEAD: Express, Hono and koa-router run GET handlers for HEAD requests.
 */
export function matchesPattern(pattern: RoutePattern, method: string, normalizedPath: string): boolean {
  const m = pattern.method;
  return (m === undefined || m === method || (m === "GET" && method === "HEAD")) && pattern.regex.test(normalizedPath);
}
