// Validates rendered Kubernetes manifests (a multi-document YAML file) against the schemas
// of their kinds: the Kubernetes API's (kubernetes-models), the Prometheus Operator's
// CRDs (@kubernetes-models/prometheus-operator) and LeaderWorkerSet's (lws_schema.mjs,
// with its pod templates as PodTemplateSpec). Unknown fields, wrong types and missing
// required fields fail; so does a kind none of them knows. Then every Service, PDB and
// PodMonitor selector must match the labels of some pod template rendered with it: a
// selector that selects nothing is valid to the API server, and silently useless.
//   node validate_manifests.mjs rendered.yaml
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import Ajv from 'ajv';
import { PodTemplateSpec } from 'kubernetes-models/v1/PodTemplateSpec';
import { leaderWorkerSetSchema, leaderWorkerSetTemplates } from './lws_schema.mjs';

const validateLws = new Ajv({ allErrors: true }).compile(leaderWorkerSetSchema);

// LeaderWorkerSet: its own schema, then each pod template as Kubernetes' PodTemplateSpec.
function checkLeaderWorkerSet(obj) {
  if (!validateLws(obj)) {
    throw new Error(validateLws.errors.map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`).join('; '));
  }
  for (const t of leaderWorkerSetTemplates(obj)) new PodTemplateSpec(t).validate();
}

// Pod templates' labels, and selectors with what they belong to.
const podLabels = [];
const selectors = [];
function noteLabelsAndSelectors(obj, name) {
  const templates = obj.kind === 'LeaderWorkerSet'
    ? leaderWorkerSetTemplates(obj) : [obj.spec?.template].filter(Boolean);
  for (const t of templates) podLabels.push(t.metadata?.labels ?? {});
  if (obj.kind === 'Service' && obj.spec?.selector) selectors.push([name, obj.spec.selector]);
  if (['PodDisruptionBudget', 'PodMonitor'].includes(obj.kind) && obj.spec?.selector?.matchLabels) {
    selectors.push([name, obj.spec.selector.matchLabels]);
  }
}

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
  noteLabelsAndSelectors(obj, name);
  if (apiVersion === 'leaderworkerset.x-k8s.io/v1' && kind === 'LeaderWorkerSet') {
    try {
      checkLeaderWorkerSet(obj);
      checked++;
    } catch (e) {
      console.error(`${name}: ${e.message}`);
      failed++;
    }
    continue;
  }
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
for (const [name, selector] of selectors) {
  const matches = (labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);
  if (!podLabels.some(matches)) {
    console.error(`${name}: its selector ${JSON.stringify(selector)} matches no pod template here`);
    failed++;
  }
}
console.log(`${file}: ${checked} objects valid, ${failed} invalid`);
process.exit(failed ? 1 : 0);
