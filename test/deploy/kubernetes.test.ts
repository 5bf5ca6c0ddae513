/**
 * deploy/kubernetes/deployment.yaml against the daemon it runs: the manifest is parsed, meter's
 * settings are read the way the daemon reads them (the image's ENV, then the container's env),
 * and the probes, ports, data directory and grace period must agree with what the daemon does.
 * The probes' paths are then asked of a real daemon started with those settings.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DockerfileParser } from 'dockerfile-ast';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { packageRoot } from '../../src/paths.js';
import { getProvider } from '../../src/providers/index.js';
import { DRAIN_LIMIT_MS, STOP_LIMIT_MS, STORE_CLOSE_LIMIT_MS, startDaemon } from '../../src/server/daemon.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

interface Probe {
  httpGet: { path: string; port: string | number };
  periodSeconds?: number;
  failureThreshold?: number;
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Container {
  name: string;
  image: string;
  restartPolicy?: string;
  ports?: { name?: string; containerPort: number }[];
  env?: EnvVar[];
  volumeMounts?: { name: string; mountPath: string }[];
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
}
interface Manifest {
  kind: string;
  spec: {
    template: {
      spec: {
        terminationGracePeriodSeconds: number;
        initContainers?: Container[];
        containers: Container[];
        volumes: { name: string; emptyDir?: object }[];
      };
    };
    ingress?: { ports: { port: number | string }[] }[];
  };
}

const documents = parseAllDocuments(readFileSync(join(packageRoot, 'deploy/kubernetes/deployment.yaml'), 'utf8'));
const manifests = documents.map((d) => {
  expect(d.errors).toEqual([]);
  return d.toJS() as Manifest;
});
const deployment = manifests.find((m) => m.kind === 'Deployment')!;
const pod = deployment.spec.template.spec;
const meter = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === 'meter')!;
const app = pod.containers.find((c) => c.name !== 'meter')!;

/** What the daemon in meter's container reads: the image's ENV, then the container's env. */
function meterEnvironment(secrets: Record<string, string>): Record<string, string> {
  const dockerfile = DockerfileParser.parse(readFileSync(join(packageRoot, 'Dockerfile'), 'utf8'));
  const image = dockerfile
    .getInstructions()
    .filter((i) => i.getKeyword() === 'ENV')
    .flatMap((i) => i.getArguments().map((a) => a.getValue().split('=') as [string, string]));
  const own = (meter.env ?? []).map((v): [string, string] => {
    const ref = v.valueFrom?.secretKeyRef;
    return [v.name, ref ? secrets[`${ref.name}/${ref.key}`]! : v.value!];
  });
  return Object.fromEntries([...image, ...own]);
}

/** A probe's port as a number (a named port is looked up in the container's ports). */
const probePort = (probe: Probe) =>
  typeof probe.httpGet.port === 'number'
    ? probe.httpGet.port
    : meter.ports!.find((p) => p.name === probe.httpGet.port)!.containerPort;

describe('deploy/kubernetes/deployment.yaml', () => {
  const config = loadConfig(meterEnvironment({ 'meter-database/DATABASE_URL': 'postgres://meter:pw@db:5432/meter' }));

  it('puts the application and meter in one pod, meter as a sidecar started first and stopped last', () => {
    expect(app).toBeDefined();
    expect(pod.initContainers).toContainEqual(expect.objectContaining({ name: 'meter', restartPolicy: 'Always' }));
  });

  it('probes the daemon where it listens: readiness /readyz, liveness and startup /healthz', () => {
    expect(meter.readinessProbe!.httpGet.path).toBe('/readyz');
    expect(meter.livenessProbe!.httpGet.path).toBe('/healthz');
    expect(meter.startupProbe!.httpGet.path).toBe('/healthz'); // up while the database is late
    for (const probe of [meter.readinessProbe!, meter.livenessProbe!, meter.startupProbe!])
      expect(probePort(probe)).toBe(config.port);
    expect(meter.ports!.map((p) => p.containerPort)).toEqual([config.port]);
    expect(config.port).toBe(8787); // the daemon's default, which README's base URLs use
    // The kubelet probes from the node: a daemon on loopback would never be ready.
    expect(config.host).not.toMatch(/^(127\.|localhost$|::1$)/);
  });

  it('keeps the spool on an emptyDir and reads DATABASE_URL from a Secret', () => {
    const mount = meter.volumeMounts!.find((m) => m.mountPath === config.dataDir);
    expect(mount, `a volume mounted at ${config.dataDir}`).toBeDefined();
    expect(pod.volumes.find((v) => v.name === mount!.name)!.emptyDir).toBeDefined();
    expect(meter.env!.find((v) => v.name === 'DATABASE_URL')!.valueFrom!.secretKeyRef).toEqual({
      name: 'meter-database',
      key: 'DATABASE_URL',
    });
    expect(config.databaseUrl).toBe('postgres://meter:pw@db:5432/meter');
  });

  it('gives the pod a grace period longer than meter’s longest stop', () => {
    // calls drain; the event writer's final write and an alert delivery under way each get the
    // daemon's stop limit; then the store closes
    const worstStopMs = DRAIN_LIMIT_MS + 2 * STOP_LIMIT_MS + STORE_CLOSE_LIMIT_MS;
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(worstStopMs);
  });

  it('points the application’s SDKs at the sidecar’s port on loopback, and keeps other pods off it', () => {
    const baseUrls = (app.env ?? []).filter((v) => v.name.endsWith('_BASE_URL'));
    expect(baseUrls.length).toBeGreaterThan(0);
    for (const { value } of baseUrls) {
      const url = new URL(value!);
      expect(url.host).toBe(`127.0.0.1:${config.port}`);
      expect(getProvider(/^\/proxy\/([^/]+)/.exec(url.pathname)![1]!)).toBeDefined();
    }
    const policy = manifests.find((m) => m.kind === 'NetworkPolicy')!;
    const open = policy.spec.ingress!.flatMap((rule) => rule.ports.map((p) => p.port));
    expect(open).not.toContain(config.port);
    expect(open).toEqual(app.ports!.map((p) => p.containerPort));
  });

  it.skipIf(!postgresUrl)('the probes’ paths answer 200 on a daemon started with these settings', async () => {
    const databaseUrl = await createTestDatabase();
    const env = meterEnvironment({ 'meter-database/DATABASE_URL': databaseUrl });
    // Loopback and a free port here; everything else as the manifest sets it.
    const daemon = await startDaemon(
      loadConfig({ ...env, METER_HOST: '127.0.0.1', METER_PORT: '0', METER_DATA_DIR: tempDirAtFileEnd() }),
      pino({ level: 'silent' }),
    );
    atFileEnd(() => daemon.close());
    for (const probe of [meter.readinessProbe!, meter.livenessProbe!, meter.startupProbe!])
      expect((await fetch(`${daemon.url}${probe.httpGet.path}`)).status, probe.httpGet.path).toBe(200);
  });
});
