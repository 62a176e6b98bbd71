// ajv side of the JSON Schema validation throughput comparison with Aegis
// (scripts/bench-ajv runs both). It loads the draft 2020-12 required tests
// of the JSON-Schema-Test-Suite (skipping remote-ref groups, like the Go
// side), compiles every group's schema with Ajv2020, checks ajv's answers
// against the labels, then times validations on one thread.
//
// usage: node bench.mjs SUITE_DIR IDS_OUT [SECONDS]
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.env.AJV_MODULES || process.cwd(), "x.js"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats");

const [suite, idsOut, secs = "3"] = process.argv.slice(2);
const dir = path.join(suite, "tests", "draft2020-12");

function walk(d) {
  let out = [];
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) out = out.concat(walk(p));
    else if (p.endsWith(".json")) out.push(p);
  }
  return out.sort();
}

const cases = [];
let skippedCompile = 0, remote = 0, mismatches = 0, threw = 0;
for (const f of walk(dir)) {
  const rel = path.relative(dir, f);
  if (rel.startsWith("optional" + path.sep)) continue;
  const text = fs.readFileSync(f, "utf8");
  const groups = JSON.parse(text);
  groups.forEach((g, gi) => {
    if (JSON.stringify(g.schema).includes("localhost:1234")) { remote += g.tests.length; return; }
    let validate;
    try {
      const ajv = new Ajv2020({ strict: false, validateFormats: false });
      addFormats(ajv);
      validate = ajv.compile(g.schema);
    } catch (e) {
      skippedCompile += g.tests.length;
      return;
    }
    g.tests.forEach((t, ti) => {
      let ok;
      try {
        ok = validate(t.data);
      } catch (e) {
        threw++; // ajv overflows its stack on a few recursive schemas
        return;
      }
      if (ok !== t.valid) mismatches++;
      cases.push({ id: `draft2020-12/${rel}#${gi}/${ti}`, validate, data: t.data, text: JSON.stringify(t.data) });
    });
  });
}
fs.writeFileSync(idsOut, JSON.stringify(cases.map((c) => c.id)));

// timeit returns [validations per wall second, per CPU second]. The CPU
// rate (user+system of the process) is what waiting for a core on a
// shared machine does not distort; the Go side reports the same pair.
function timeit(fn) {
  // warm up, then run whole passes over the cases for SECONDS
  for (let i = 0; i < 20; i++) fn();
  const limit = Number(secs) * 1e9;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let passes = 0, elapsed = 0n;
  do {
    fn();
    passes++;
    elapsed = process.hrtime.bigint() - t0;
  } while (Number(elapsed) < limit);
  const c = process.cpuUsage(c0);
  const n = passes * cases.length;
  return [n / (Number(elapsed) / 1e9), n / ((c.user + c.system) / 1e6)];
}

// The structured-output set (bench/ajv/structured.json): strict-mode
// schemas of the kind a gateway sees, with valid and invalid instances.
const structured = [];
const structDir = path.dirname(new URL(import.meta.url).pathname);
for (const s of JSON.parse(fs.readFileSync(path.join(structDir, "structured.json"), "utf8"))) {
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  const validate = ajv.compile(s.schema);
  for (const text of s.instances) structured.push({ validate, text, data: JSON.parse(text) });
}

let sink = 0;
const [preparsed, preparsedCPU] = timeit(() => { for (const c of cases) if (c.validate(c.data)) sink++; });
const [parsed, parsedCPU] = timeit(() => { for (const c of cases) if (c.validate(JSON.parse(c.text))) sink++; });
const suiteCases = cases.splice(0, cases.length, ...structured);
const [sPre, sPreCPU] = timeit(() => { for (const c of cases) if (c.validate(c.data)) sink++; });
const [sParsed, sParsedCPU] = timeit(() => { for (const c of cases) if (c.validate(JSON.parse(c.text))) sink++; });
cases.splice(0, cases.length, ...suiteCases);
console.log(JSON.stringify({
  validator: "ajv " + require("ajv/package.json").version,
  cases: cases.length,
  remote_skipped: remote,
  compile_skipped: skippedCompile,
  label_mismatches: mismatches,
  validate_threw: threw,
  validations_per_sec_preparsed: Math.round(preparsed),
  validations_per_sec_parse_and_validate: Math.round(parsed),
  validations_per_cpu_sec_preparsed: Math.round(preparsedCPU),
  validations_per_cpu_sec_parse_and_validate: Math.round(parsedCPU),
  structured_cases: structured.length,
  structured_per_sec_preparsed: Math.round(sPre),
  structured_per_sec_parse_and_validate: Math.round(sParsed),
  structured_per_cpu_sec_preparsed: Math.round(sPreCPU),
  structured_per_cpu_sec_parse_and_validate: Math.round(sParsedCPU),
  sink: sink > 0,
}));
