/**
 * A package-lock.json for a scratch app outside the repository, so `npm ci --offline` installs
 * it from the npm cache alone: the app's registry dependencies are copied, with their whole
 * dependency closure, from the repository's own lockfile (whose tarballs `npm ci` already put in
 * the cache), and the packed Floodgate tarballs are `file:` entries with their own integrity.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";

interface LockEntry {
  version?: string;
  resolved?: string;
  integrity?: string;
  link?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [key: string]: unknown;
}

export interface Tarball {
  /** The package's name, e.g. "@floodgate/core". */
  name: string;
  /** The tarball's absolute path. */
  file: string;
  /** The package.json inside it. */
  manifest: {
    version: string;
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    bin?: unknown;
    license?: string;
    engines?: Record<string, string>;
  };
}

/** Where Node would find `name` from the package installed at `from` ("" is the root). */
function locate(packages: Record<string, LockEntry>, from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = `${dir === "" ? "" : `${dir}/`}node_modules/${name}`;
    if (packages[candidate] !== undefined) return candidate;
    if (dir === "") return undefined;
    const at = dir.lastIndexOf("/node_modules/");
    dir = at === -1 ? "" : dir.slice(0, at);
  }
}

export function scratchLock(options: {
  repoLockFile: string;
  appDir: string;
  /** Registry dependencies of the app, at the versions the repository has installed. */
  registryDependencies: string[];
  tarballs: Tarball[];
}): { packageJson: Record<string, unknown>; lock: Record<string, unknown> } {
  const repo = JSON.parse(readFileSync(options.repoLockFile, "utf8")) as { packages: Record<string, LockEntry> };
  const packages: Record<string, LockEntry> = {};
  const dependencies: Record<string, string> = {};

  const copy = (from: string, name: string, required: boolean): void => {
    const key = locate(repo.packages, from, name);
    if (key === undefined) {
      if (required) throw new Error(`${name} (needed from "${from || "the app"}") is not in the repository's package-lock.json`);
      return;
    }
    const entry = repo.packages[key]!;
    if (entry.link === true) throw new Error(`${name} is a workspace link in the repository, not a registry package`);
    if (packages[key] !== undefined) return;
    const { dev: _dev, devOptional: _devOptional, peer: _peer, optional: _optional, ...kept } = entry;
    packages[key] = kept;
    for (const dep of Object.keys(entry.dependencies ?? {})) copy(key, dep, true);
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) copy(key, dep, false);
    for (const dep of Object.keys(entry.peerDependencies ?? {})) copy(key, dep, entry.peerDependenciesMeta?.[dep]?.optional !== true);
  };

  for (const name of options.registryDependencies) {
    const key = locate(repo.packages, "", name);
    const version = key === undefined ? undefined : repo.packages[key]!.version;
    if (version === undefined) throw new Error(`${name} is not installed in the repository`);
    dependencies[name] = version;
    copy("", name, true);
  }
  for (const tarball of options.tarballs) {
    const resolved = `file:${path.relative(options.appDir, tarball.file).split(path.sep).join("/")}`;
    dependencies[tarball.name] = resolved;
    const { version, dependencies: deps, peerDependencies, bin, license, engines } = tarball.manifest;
    packages[`node_modules/${tarball.name}`] = {
      version,
      resolved,
      integrity: `sha512-${createHash("sha512").update(readFileSync(tarball.file)).digest("base64")}`,
      ...(license !== undefined ? { license } : {}),
      ...(deps !== undefined ? { dependencies: deps } : {}),
      ...(bin !== undefined ? { bin } : {}),
      ...(engines !== undefined ? { engines } : {}),
      ...(peerDependencies !== undefined ? { peerDependencies } : {}),
    };
    for (const dep of Object.keys(deps ?? {})) if (!dep.startsWith("@floodgate/")) copy("", dep, true);
  }
  const packageJson = { name: "floodgate-scratch-app", version: "0.0.0", private: true, dependencies };
  const sorted = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => a.localeCompare(b)));
  return {
    packageJson,
    lock: {
      name: packageJson.name,
      version: packageJson.version,
      lockfileVersion: 3,
      requires: true,
      packages: { "": { name: packageJson.name, version: packageJson.version, dependencies }, ...sorted },
    },
  };
}
