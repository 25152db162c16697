// Validates Kubernetes manifests offline against the API's schemas, as
// the kubernetes-models package carries them (generated from the
// Kubernetes OpenAPI document):
// 1. each YAML document's apiVersion/kind names a model, whose validate()
//    checks types, required fields, formats and enums;
// 2. its validator accepts fields it does not know, so each document is
//    also written out as a TypeScript object literal typed with the
//    model's interface and compiled with tsc: an unknown or misspelt
//    field anywhere is an excess-property error.
// usage: node validate_kubernetes.mjs WORKDIR FILE.yaml...
// Prints one line per document; exits 1 when any is invalid.
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);
const [work, ...files] = process.argv.slice(2);
let bad = 0;

function modelPath(apiVersion, kind) {
  const group = apiVersion.includes("/") ? apiVersion : `v1`;
  return `kubernetes-models/${group}/${kind}`;
}

const ts = [];
for (const file of files) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const [i, doc] of docs.entries()) {
    const where = `${basename(file)}#${i}`;
    if (doc.errors.length) {
      console.log(`${where}: YAML: ${doc.errors[0].message}`);
      bad++;
      continue;
    }
    const obj = doc.toJS();
    if (!obj || !obj.apiVersion || !obj.kind) {
      console.log(`${where}: no apiVersion or kind`);
      bad++;
      continue;
    }
    const path = modelPath(obj.apiVersion, obj.kind);
    let Model;
    try {
      Model = (await import(path))[obj.kind];
    } catch (e) {
      console.log(`${where}: ${obj.apiVersion} ${obj.kind}: unknown to the API`);
      bad++;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`${where}: ${obj.kind} ${obj.metadata?.name}: schema ok`);
    } catch (e) {
      console.log(`${where}: ${obj.kind}: ${e.message}`);
      bad++;
    }
    ts.push(`// ${where}\nimport type { I${obj.kind} as T${ts.length} } from ` +
            `"${path}";\nexport const d${ts.length}: T${ts.length} = ` +
            `${JSON.stringify(obj, null, 2)};\n`);
  }
}

const out = join(work, "manifests.ts");
writeFileSync(out, ts.join("\n"));
const tsc = require("typescript");
const program = tsc.createProgram([out], {
  noEmit: true, strict: true, module: tsc.ModuleKind.NodeNext,
  moduleResolution: tsc.ModuleResolutionKind.NodeNext,
  skipLibCheck: true, types: [],
});
const diags = tsc.getPreEmitDiagnostics(program);
for (const d of diags) {
  const msg = tsc.flattenDiagnosticMessageText(d.messageText, "\n");
  let at = "";
  if (d.file && d.start !== undefined) {
    const { line } = d.file.getLineAndCharacterOfPosition(d.start);
    at = `${basename(d.file.fileName)}:${line + 1}: `;
  }
  console.log(`${at}${msg}`);
  bad++;
}
if (!diags.length)
  console.log(`${ts.length} documents: no unknown fields (tsc)`);
process.exit(bad ? 1 : 0);
