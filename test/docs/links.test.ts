/**
 * The docs cannot rot silently: every relative link, every absolute link into this repository
 * (`https://github.com/<owner>/<repo>/blob/main/...`, read from the root package.json's
 * `repository`) and every `#anchor` in the Markdown users read resolves; the package READMEs,
 * read on npm and JSR where relative links lead nowhere, link the docs only absolutely; and the
 * reference pages have a section for every option, warning and error code the
 * source defines (read from the source at test time, so a new option without docs fails here).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { type FloodgateErrorCode, slidingWindow } from "../../packages/core/src/index.ts";
import { createHttpRateLimiter, WARNINGS } from "../../packages/core/src/http/index.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** `https://github.com/<owner>/<repo>`, from the root package.json's `repository.url`. */
function repositoryUrl(): string {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { repository?: { url?: string } };
  const m = /^(?:git\+)?(https:\/\/github\.com\/[\w.-]+\/[\w.-]+?)(?:\.git)?$/.exec(pkg.repository?.url ?? "");
  if (m === null) throw new Error(`the root package.json has no GitHub repository.url: ${JSON.stringify(pkg.repository)}`);
  return m[1]!;
}

/** Where a file of the main branch is read on GitHub; links starting with it are links into this repository. */
const BLOB_BASE = `${repositoryUrl()}/blob/main/`;
const TREE_BASE = `${repositoryUrl()}/tree/main/`;

/** Every code, checked against the union by the typechecker: a missing or unknown key fails `tsc`. */
const ERROR_CODES: Record<FloodgateErrorCode, true> = {
  INVALID_OPTION: true,
  INVALID_ARGUMENT: true,
  STORE_ERROR: true,
  STORE_TIMEOUT: true,
  LEASE_UNSUITABLE: true,
  STORE_UNAVAILABLE: true,
};

function markdownUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...markdownUnder(path));
    else if (entry.endsWith(".md")) out.push(path);
  }
  return out;
}

function documents(): string[] {
  const files = [join(ROOT, "README.md")];
  for (const pkg of readdirSync(join(ROOT, "packages"))) {
    const readme = join(ROOT, "packages", pkg, "README.md");
    if (existsSync(readme)) files.push(readme);
  }
  if (existsSync(join(ROOT, "docs"))) files.push(...markdownUnder(join(ROOT, "docs")));
  return files;
}

/** The text outside fenced code blocks and inline code spans, where links are links. */
function prose(markdown: string): string {
  return markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "")
    .replace(/(`+)[\s\S]*?\1/g, "");
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/<[^>]*>/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The headings of a Markdown file, as written (outside code blocks). */
function headings(markdown: string): string[] {
  const outside = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "");
  return [...outside.matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)].map((m) => m[1]!);
}

/** Anchors a file offers: its headings' slugs (repeats numbered as GitHub does) and explicit ids. */
function anchorsOf(file: string): Set<string> {
  const markdown = readFileSync(file, "utf8");
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const heading of headings(markdown)) {
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of markdown.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]!);
  return anchors;
}

interface Link {
  readonly from: string;
  readonly target: string;
}

/** Every link target in a file's prose: inline links and reference definitions, of any scheme. */
function allLinksOf(file: string): Link[] {
  const text = prose(readFileSync(file, "utf8"));
  const targets = [
    ...[...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
    ...[...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]!),
  ];
  return targets.map((target) => ({ from: file, target }));
}

const isAbsolute = (target: string): boolean => /^[a-z][a-z0-9+.-]*:/i.test(target);
const intoRepository = (target: string): boolean => target.startsWith(BLOB_BASE) || target.startsWith(TREE_BASE);

/** The relative links, and the absolute ones into this repository. */
function linksOf(file: string): Link[] {
  return allLinksOf(file).filter((l) => !isAbsolute(l.target) || intoRepository(l.target));
}

/** What is wrong with a link, or undefined when it resolves. */
function problem(link: Link): string | undefined {
  const hash = link.target.indexOf("#");
  const pathPart = decodeURI(hash === -1 ? link.target : link.target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(link.target.slice(hash + 1));
  const repoPath = pathPart.startsWith(BLOB_BASE)
    ? pathPart.slice(BLOB_BASE.length)
    : pathPart.startsWith(TREE_BASE)
    ? pathPart.slice(TREE_BASE.length)
    : undefined;
  const file = repoPath !== undefined ? join(ROOT, repoPath) : pathPart === "" ? link.from : resolve(dirname(link.from), pathPart);
  if (!existsSync(file)) return `${relative(ROOT, file)} does not exist`;
  if (anchor === undefined || anchor === "") return undefined;
  if (!file.endsWith(".md")) return undefined; // a line anchor in source (#L10) is GitHub's, not a heading
  return anchorsOf(file).has(anchor) ? undefined : `${relative(ROOT, file)} has no heading #${anchor}`;
}

const sourceFiles = (dir: string): string[] =>
  readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? sourceFiles(path) : entry.endsWith(".ts") ? [path] : [];
  });

/** The body of `export interface <name>` and what it extends, from whichever core source defines it. */
function findInterface(name: string): { body: string; extends: string[] } {
  for (const file of sourceFiles(join(ROOT, "packages/core/src"))) {
    const source = readFileSync(file, "utf8");
    const head = new RegExp(`export interface ${name}\\b[^{]*\\{`).exec(source);
    if (head === null) continue;
    const extendsText = /\bextends\s+([^{]+)\{$/.exec(head[0])?.[1] ?? "";
    let depth = 1;
    let i = head.index + head[0].length;
    const start = i;
    for (; i < source.length && depth > 0; i++) {
      if (source[i] === "{") depth++;
      else if (source[i] === "}") depth--;
    }
    const parents = extendsText.split(",").map((s) => s.trim().replace(/<.*$/s, "")).filter((s) => /^\w+$/.test(s));
    return { body: source.slice(start, i - 1), extends: parents };
  }
  throw new Error(`no \`export interface ${name}\` under packages/core/src`);
}

/** The property names of an interface (its own and its parents'), read from the source. */
function propertiesOf(name: string): string[] {
  const { body, extends: parents } = findInterface(name);
  const names: string[] = [];
  let depth = 0;
  for (const line of body.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "").split("\n")) {
    if (depth === 0) {
      const m = /^\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*:/.exec(line);
      if (m) names.push(m[1]!);
    }
    for (const c of line) {
      if (c === "{" || c === "(" || c === "[") depth++;
      else if (c === "}" || c === ")" || c === "]") depth--;
    }
  }
  return [...parents.flatMap(propertiesOf), ...names];
}

/** The option names `rateLimit()` accepts, from the message its validation gives for an unknown option. */
function acceptedOptions(): string[] {
  const access = { method: () => "GET", path: () => "/", header: () => undefined };
  let message = "";
  try {
    createHttpRateLimiter({ policy: slidingWindow({ limit: 1, window: "1s" }), notAnOption: true } as never, access);
  } catch (error) {
    message = (error as Error).message;
  }
  const list = /accepted options: ([^.]+)\./.exec(message)?.[1];
  if (list === undefined) throw new Error(`no list of accepted options in: ${message}`);
  return list.split(",").map((name) => name.trim());
}

/** Heading texts of a docs page: a section exists for `name` when a heading spells it in backticks. */
function sectionNames(page: string): Set<string> {
  const names = new Set<string>();
  for (const heading of headings(readFileSync(join(ROOT, page), "utf8"))) {
    for (const m of heading.matchAll(/`([^`]+)`/g)) names.add(m[1]!);
  }
  return names;
}

describe("docs", () => {
  const files = documents();

  it("finds the documents it checks", () => {
    expect(files.map((f) => relative(ROOT, f))).toContain("docs/README.md");
    expect(files.length).toBeGreaterThan(10);
  });

  it("every relative link and #anchor resolves to a file and heading", () => {
    const links = files.flatMap(linksOf);
    expect(links.length).toBeGreaterThan(50);
    const broken = links.flatMap((link) => {
      const why = problem(link);
      return why === undefined ? [] : [`${relative(ROOT, link.from)}: (${link.target}) ${why}`];
    });
    expect(broken).toEqual([]);
  });

  it("the package READMEs link the docs absolutely (npm and JSR show no other files), each to a page that exists", () => {
    const readmes = readdirSync(join(ROOT, "packages")).map((p) => join(ROOT, "packages", p, "README.md")).filter((f) => existsSync(f));
    // Every published package has one (the workspaces of the root package.json).
    const workspaces: string[] = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).workspaces;
    expect(readmes.map((f) => relative(ROOT, f)).sort()).toEqual(workspaces.map((w) => `${w}/README.md`).sort());
    for (const readme of readmes) {
      const links = allLinksOf(readme);
      const name = relative(ROOT, readme);
      expect(links.filter((l) => !isAbsolute(l.target) && !l.target.startsWith("#")).map((l) => `${name}: ${l.target}`)).toEqual([]);
      const docs = links.filter((l) => l.target.startsWith(`${BLOB_BASE}docs/`));
      expect(docs.length, `${name} links no page of docs/ (base ${BLOB_BASE}docs/)`).toBeGreaterThanOrEqual(3);
      // A link to the repository's own README is a dead end for someone reading the package page.
      expect(links.filter((l) => l.target === `${BLOB_BASE}README.md` || l.target === repositoryUrl()).map((l) => `${name}: ${l.target}`))
        .toEqual([]);
      const broken = docs.flatMap((link) => {
        const why = problem(link);
        return why === undefined ? [] : [`${name}: (${link.target}) ${why}`];
      });
      expect(broken).toEqual([]);
    }
  });

  it("an absolute link into the repository is checked like a relative one", () => {
    const from = join(ROOT, "packages/core/README.md");
    expect(problem({ from, target: `${BLOB_BASE}docs/reference/options.md#trustproxy` })).toBeUndefined();
    expect(problem({ from, target: `${BLOB_BASE}docs/no-such-page.md` })).toBe("docs/no-such-page.md does not exist");
    expect(problem({ from, target: `${BLOB_BASE}docs/reference/options.md#no-such-option` })).toBe(
      "docs/reference/options.md has no heading #no-such-option",
    );
    expect(linksOf(from).some((l) => l.target.startsWith(BLOB_BASE))).toBe(true);
  });

  it("docs/README.md links every other page under docs/", () => {
    const index = join(ROOT, "docs/README.md");
    const linked = new Set(linksOf(index).map((l) => resolve(dirname(index), decodeURI(l.target.split("#")[0]!))));
    const unlinked = markdownUnder(join(ROOT, "docs")).filter((f) => f !== index && !linked.has(f)).map((f) => relative(ROOT, f));
    expect(unlinked).toEqual([]);
  });

  it("docs/reference/options.md has a section for every option of HttpRateLimitOptions", () => {
    const declared = propertiesOf("HttpRateLimitOptions");
    expect(declared).toEqual(expect.arrayContaining(["trustProxy", "onStoreError", "headers", "rules"]));
    // The option table the middleware validates against, as its unknown-option error lists it.
    const accepted = acceptedOptions();
    expect(accepted).toEqual(expect.arrayContaining(declared));
    const options = [...new Set([...declared, ...accepted])];
    const sections = sectionNames("docs/reference/options.md");
    expect(options.filter((o) => !sections.has(o))).toEqual([]);
  });

  it("docs/reference/errors.md has a section for every warning code and every FloodgateError code", () => {
    const sections = sectionNames("docs/reference/errors.md");
    const codes = [...Object.keys(WARNINGS), ...Object.keys(ERROR_CODES)];
    expect(codes.length).toBeGreaterThan(5);
    expect(codes.filter((c) => !sections.has(c))).toEqual([]);
  });

  it("the slugs follow GitHub's rules", () => {
    expect(slug("`trustProxy`")).toBe("trustproxy");
    expect(slug("Cloudflare (and Workers)")).toBe("cloudflare-and-workers");
    expect(slug("`createRateLimiter(options)`")).toBe("createratelimiteroptions");
    expect(slug("What is *not* guaranteed")).toBe("what-is-not-guaranteed");
  });
});
