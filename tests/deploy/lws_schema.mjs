// The LeaderWorkerSet v1 API (sigs.k8s.io/lws, config/crd/bases/
// leaderworkerset.x-k8s.io_leaderworkersets.yaml) as a JSON schema: no npm package
// carries it. Written from the CRD's field list, with unknown fields refused as the API
// server's structural schema does; the pod templates inside are left to
// kubernetes-models' PodTemplateSpec (validate_manifests.mjs).
const intOrString = { anyOf: [{ type: 'integer' }, { type: 'string' }] };

export const leaderWorkerSetSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'leaderworkerset.x-k8s.io/v1' },
    kind: { const: 'LeaderWorkerSet' },
    metadata: { type: 'object' },
    status: { type: 'object' },
    spec: {
      type: 'object',
      required: ['leaderWorkerTemplate'],
      additionalProperties: false,
      properties: {
        replicas: { type: 'integer', minimum: 0 },
        startupPolicy: { enum: ['LeaderCreated', 'LeaderReady'] },
        networkConfig: {
          type: 'object',
          additionalProperties: false,
          properties: { subdomainPolicy: { enum: ['Shared', 'UniquePerReplica'] } },
        },
        rolloutStrategy: {
          type: 'object',
          additionalProperties: false,
          properties: {
            type: { enum: ['RollingUpdate'] },
            rollingUpdateConfiguration: {
              type: 'object',
              additionalProperties: false,
              properties: { maxUnavailable: intOrString, maxSurge: intOrString },
            },
          },
        },
        leaderWorkerTemplate: {
          type: 'object',
          required: ['workerTemplate'],
          additionalProperties: false,
          properties: {
            size: { type: 'integer', minimum: 1 },
            restartPolicy: { enum: ['RecreateGroupOnPodRestart', 'Default', 'None'] },
            leaderTemplate: { type: 'object' },
            workerTemplate: { type: 'object' },
            subGroupPolicy: {
              type: 'object',
              additionalProperties: false,
              properties: { subGroupSize: { type: 'integer', minimum: 1 } },
            },
            volumeClaimTemplates: { type: 'array' },
          },
        },
      },
    },
  },
};

// The pod templates of a LeaderWorkerSet, for the schema of PodTemplateSpec.
export function leaderWorkerSetTemplates(obj) {
  const t = obj.spec?.leaderWorkerTemplate ?? {};
  return [t.leaderTemplate, t.workerTemplate].filter(Boolean);
}
