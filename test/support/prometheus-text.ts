// A strict parser of the Prometheus text exposition format (version 0.0.4), written from the
// format's specification and independent of any exporter: `# HELP` and `# TYPE` lines, samples
// `name{label="value",...} value [timestamp]`, label values with the \\, \" and \n escapes, values
// as Go floats with +Inf, -Inf and NaN. Anything else is an error naming the line.

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  type: string;
  help: string | undefined;
  readonly samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);
/** The sample names a family of each type may hold, from its own name. */
const SUFFIXES: Readonly<Record<string, readonly string[]>> = {
  counter: [""],
  gauge: [""],
  untyped: [""],
  histogram: ["_bucket", "_sum", "_count"],
  summary: ["", "_sum", "_count"],
};

function parseValue(text: string, line: number): number {
  if (text === "+Inf" || text === "Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: not a value: ${JSON.stringify(text)}`);
  return Number(text);
}

function parseLabels(text: string, line: number): [Record<string, string>, string] {
  const labels: Record<string, string> = {};
  let rest = text.slice(1);
  for (;;) {
    rest = rest.trimStart();
    if (rest.startsWith("}")) return [labels, rest.slice(1)];
    const name = LABEL_NAME.exec(rest)?.[0];
    if (name === undefined) throw new Error(`line ${line}: bad label name in ${JSON.stringify(text)}`);
    if (Object.hasOwn(labels, name)) throw new Error(`line ${line}: label ${name} twice`);
    rest = rest.slice(name.length);
    if (!rest.startsWith('="')) throw new Error(`line ${line}: expected =" after label ${name}`);
    rest = rest.slice(2);
    let value = "";
    for (;;) {
      const c = rest[0];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      rest = rest.slice(1);
      if (c === '"') break;
      if (c === "\\") {
        const e = rest[0];
        rest = rest.slice(1);
        if (e === "\\") value += "\\";
        else if (e === '"') value += '"';
        else if (e === "n") value += "\n";
        else throw new Error(`line ${line}: bad escape \\${e}`);
      } else value += c;
    }
    labels[name] = value;
    rest = rest.trimStart();
    if (rest.startsWith(",")) rest = rest.slice(1);
    else if (!rest.startsWith("}")) throw new Error(`line ${line}: expected , or } after label ${name}`);
  }
}

/** Parses a whole scrape into its metric families, by name. */
export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const familyOf = (sample: string): Family | undefined => {
    for (const family of families.values()) {
      if (SUFFIXES[family.type]!.some((suffix) => family.name + suffix === sample)) return family;
    }
    return undefined;
  };
  text.split("\n").forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === "") return;
    if (raw.startsWith("#")) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(raw);
      if (m === null) return; // a comment
      const [, kind, name, rest] = m;
      if (!METRIC_NAME.test(name!) || METRIC_NAME.exec(name!)![0] !== name) throw new Error(`line ${line}: bad metric name ${name}`);
      let family = families.get(name!);
      if (family === undefined) families.set(name!, family = { name: name!, type: "untyped", help: undefined, samples: [] });
      if (kind === "TYPE") {
        if (!TYPES.has(rest ?? "")) throw new Error(`line ${line}: unknown type ${rest}`);
        if (family.samples.length > 0) throw new Error(`line ${line}: TYPE of ${name} after its samples`);
        family.type = rest!;
      } else family.help = (rest ?? "").replace(/\\n/g, "\n").replace(/\\\\/g, "\\");
      return;
    }
    const name = METRIC_NAME.exec(raw)?.[0];
    if (name === undefined) throw new Error(`line ${line}: not a sample: ${JSON.stringify(raw)}`);
    let rest = raw.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith("{")) [labels, rest] = parseLabels(rest, line);
    const fields = rest.trim().split(/\s+/);
    if (fields.length < 1 || fields.length > 2 || fields[0] === "") throw new Error(`line ${line}: expected a value (and a timestamp)`);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`line ${line}: bad timestamp ${fields[1]}`);
    const value = parseValue(fields[0]!, line);
    let family = familyOf(name);
    if (family === undefined) families.set(name, family = { name, type: "untyped", help: undefined, samples: [] });
    family.samples.push({ name, labels, value });
  });
  return families;
}

/** The sum of the samples named `name` whose labels include `match`. */
export function sampleSum(families: Map<string, Family>, name: string, match: Record<string, string> = {}): number {
  let total = 0;
  for (const family of families.values()) {
    for (const s of family.samples) {
      if (s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
    }
  }
  return total;
}
