// Validates rendered Kubernetes manifests (a multi-document YAML file) against the schemas
// of their kinds: the Kubernetes API's (kubernetes-models) and the Prometheus Operator's
// CRDs (@kubernetes-models/prometheus-operator). Unknown fields, wrong types and missing
// required fields fail; so does a kind neither package knows.
//   node validate_manifests.mjs rendered.yaml
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

const file = process.argv[2];
if (!file) {
  console.error('usage: node validate_manifests.mjs RENDERED.yaml');
  process.exit(2);
}
const docs = parseAllDocuments(readFileSync(file, 'utf8'));
let failed = 0;
let checked = 0;
for (const doc of docs) {
  if (doc.errors.length) {
    console.error(`${file}: YAML error: ${doc.errors[0].message}`);
    failed++;
    continue;
  }
  const obj = doc.toJS();
  if (obj === null) continue;
  const { apiVersion, kind } = obj;
  const name = `${kind}/${obj.metadata?.name}`;
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const module = group === 'monitoring.coreos.com'
    ? `@kubernetes-models/prometheus-operator/${group}/${version}`
    : `kubernetes-models/${group ? `${group}/` : ''}${version}`;
  let Model;
  try {
    Model = (await import(module))[kind];
  } catch (e) {
    Model = undefined;
  }
  if (!Model) {
    console.error(`${name}: no schema for ${apiVersion} ${kind}`);
    failed++;
    continue;
  }
  try {
    new Model(obj).validate();
    checked++;
  } catch (e) {
    console.error(`${name}: ${e.message}`);
    failed++;
  }
}
console.log(`${file}: ${checked} objects valid, ${failed} invalid`);
process.exit(failed ? 1 : 0);
