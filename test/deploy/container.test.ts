import dockerignoreModule from '@balena/dockerignore';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { DockerfileParser, type Instruction } from 'dockerfile-ast';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { packageRoot } from '../../src/paths.js';
import { DRAIN_LIMIT_MS, STOP_LIMIT_MS, STORE_CLOSE_LIMIT_MS } from '../../src/server/daemon.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';

/**
 * The container as shipped, checked against the real Dockerfile, .dockerignore and
 * docker-compose.yml without a Docker engine: what the build copies exists and reaches the
 * image, and the runtime image — laid out in a directory exactly as its COPY lines say, with
 * production dependencies only — starts as the `node` user on a data directory owned like the
 * image's, answers its HEALTHCHECK, serves the CLI and stops cleanly on SIGTERM.
 */
// The package is CommonJS (module.exports = the factory) while its types declare a default export.
const ignore = dockerignoreModule as unknown as typeof dockerignoreModule.default;
const read = (file: string) => readFileSync(join(packageRoot, file), 'utf8');
const dockerfile = DockerfileParser.parse(read('Dockerfile'));
const dockerignore = ignore().add(read('.dockerignore'));
const compose = parseYaml(read('docker-compose.yml')) as {
  services: Record<
    string,
    {
      image?: string;
      build?: unknown;
      healthcheck?: { test: string[] };
      restart?: string;
      stop_grace_period?: string;
      environment?: Record<string, string>;
      ports?: string[];
      volumes?: string[];
      depends_on?: Record<string, { condition: string }>;
    }
  >;
  volumes: Record<string, unknown>;
};

interface Stage {
  name: string | null;
  base: string;
  instructions: Instruction[];
}
const stages: Stage[] = [];
for (const i of dockerfile.getInstructions()) {
  if (i.getKeyword() === 'FROM') {
    const [base, as, name] = i.getArguments().map((a) => a.getValue());
    stages.push({ name: as?.toUpperCase() === 'AS' ? name! : null, base: base!, instructions: [] });
  } else stages.at(-1)?.instructions.push(i);
}
const finalStage = stages.at(-1)!;
const stageNamed = (name: string) => stages.find((s) => s.name === name)!;
const of = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.getKeyword() === keyword);
const args = (i: Instruction) => i.getArguments().map((a) => a.getValue());
const fromFlag = (i: Instruction) =>
  (i as Instruction & { getFromFlag(): { getValue(): string } | null }).getFromFlag()?.getValue();
/** COPY instructions: their sources (build-context paths or a stage's paths) and destination. */
const copies = (stage: Stage) =>
  of(stage, 'COPY').map((i) => {
    const a = args(i);
    return { from: fromFlag(i), sources: a.slice(0, -1), dest: a.at(-1)! };
  });
const runs = (stage: Stage) => of(stage, 'RUN').map((i) => i.getArgumentsContent()!.replace(/\s+/g, ' '));

function filesUnder(dir: string): string[] {
  const abs = join(packageRoot, dir);
  if (!statSync(abs).isDirectory()) return [dir];
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(packageRoot, join(e.parentPath, e.name)));
}

describe('the Dockerfile, against the repository', () => {
  it('pins every base image by version and digest; stages build on each other', () => {
    const names = new Set<string>();
    for (const s of stages) {
      if (!names.has(s.base)) expect(s.base, s.base).toMatch(/^[\w./-]+:\d+\.\d+\.\d+[\w.-]*@sha256:[0-9a-f]{64}$/);
      if (s.name) names.add(s.name);
    }
  });

  it('copies only what exists and what .dockerignore lets into the build context', () => {
    for (const stage of stages) {
      for (const c of copies(stage).filter((x) => x.from === undefined)) {
        for (const source of c.sources) {
          expect(existsSync(join(packageRoot, source)), `${source} exists`).toBe(true);
          for (const file of filesUnder(source))
            expect(dockerignore.ignores(file), `${file} is in the build context`).toBe(false);
        }
      }
    }
    // and the context is small: no dependencies, build output, history or tests
    for (const path of [
      'node_modules/pg/package.json',
      'dist/cli/main.js',
      '.git/HEAD',
      'test/config.test.ts',
      'README.md',
    ]) {
      expect(dockerignore.ignores(path), path).toBe(true);
    }
  });

  it('gives the build stage everything tsc compiles and the migrations, and builds with npm ci (prepare = tsc, then the embedded store template)', () => {
    const build = stageNamed('build');
    const copied = copies(build).flatMap((c) => c.sources);
    const tsconfig = JSON.parse(read('tsconfig.json')) as { include: string[]; compilerOptions: { outDir: string } };
    for (const input of ['package.json', 'package-lock.json', 'tsconfig.json', 'sql', ...tsconfig.include])
      expect(copied, input).toContain(input);
    expect(runs(build)).toContain('npm ci --no-audit --no-fund');
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.prepare).toBe('npm run build');
    expect(pkg.scripts.build).toBe('tsc -p tsconfig.json && node dist/src/store/build-embedded-template.js');
    // the image takes the compiled daemon and CLI and the embedded store's template, not the compiled benchmarks
    const fromBuild = copies(finalStage).filter((c) => c.from === 'build');
    expect(fromBuild).toEqual(
      ['src', 'cli', 'embedded-template'].map((d) => ({
        from: 'build',
        sources: [`/app/${tsconfig.compilerOptions.outDir}/${d}`],
        dest: `./dist/${d}`,
      })),
    );
  });

  it('ships what dist/ reads at run time that tsc does not emit, and no dev dependency, test or compiler', () => {
    const finalCopies = copies(finalStage);
    // sql/ (migrations) and ui/ (the spend page), read from the package root, and package.json
    // (how the root is found)
    expect(finalCopies).toContainEqual({ from: undefined, sources: ['sql'], dest: './sql' });
    expect(finalCopies).toContainEqual({ from: undefined, sources: ['ui'], dest: './ui' });
    expect(finalCopies).toContainEqual({ from: undefined, sources: ['package.json'], dest: './' });
    expect(finalCopies.map((c) => c.from ?? c.sources.join(' '))).toEqual([
      'deps',
      'build',
      'build',
      'build',
      'package.json',
      'sql',
      'ui',
    ]);
    // every file tsc does not emit (not .ts) under src/ and cli/ is emitted all the same (allowJs)
    // or read from a shipped directory
    for (const file of [...filesUnder('src'), ...filesUnder('cli')].filter((f) => !/\.tsx?$/.test(f))) {
      expect(existsSync(join(packageRoot, 'dist', file)), `dist/${file}`).toBe(true);
    }
    expect(runs(stageNamed('deps'))[0]).toMatch(/^npm ci --omit=dev --ignore-scripts /);
  });

  it('runs as node on a /data it owns, with signals reaching node and a HEALTHCHECK on /readyz', () => {
    const env = Object.fromEntries(
      of(finalStage, 'ENV')
        .flatMap(args)
        .map((kv) => kv.split('=') as [string, string]),
    );
    expect(env.METER_DATA_DIR).toBe('/data');
    expect(env.METER_HOST).toBe('0.0.0.0');
    const order = finalStage.instructions.map((i) => i.getKeyword());
    const chown = finalStage.instructions.findIndex(
      (i) => i.getKeyword() === 'RUN' && /mkdir -p \/data && chown node:node \/data/.test(i.getArgumentsContent()!),
    );
    expect(chown).toBeGreaterThanOrEqual(0);
    expect(chown).toBeLessThan(order.indexOf('VOLUME'));
    expect(args(of(finalStage, 'VOLUME')[0]!)).toEqual(['/data']);
    expect(args(of(finalStage, 'USER')[0]!)).toEqual(['node']);
    expect(order.indexOf('USER')).toBeGreaterThan(chown);
    // exec form: node is PID 1 and gets SIGTERM itself (no shell in between)
    expect(JSON.parse(of(finalStage, 'ENTRYPOINT')[0]!.getArgumentsContent()!)).toEqual(['node', 'dist/cli/main.js']);
    expect(JSON.parse(of(finalStage, 'CMD')[0]!.getArgumentsContent()!)).toEqual(['start']);
    expect(healthcheckCommand().join(' ')).toContain('/readyz');
  });
});

/** The HEALTHCHECK's exec-form command. */
function healthcheckCommand(): string[] {
  const content = of(finalStage, 'HEALTHCHECK')[0]!.getArgumentsContent()!;
  return JSON.parse(/CMD\s+(\[.*\])\s*$/s.exec(content)![1]!) as string[];
}

describe('docker-compose.yml', () => {
  const { db, meter } = compose.services;

  it('pins the database image and checks it over TCP', () => {
    expect(db!.image).toMatch(/^timescale\/timescaledb:\d+\.\d+\.\d+-pg\d+$/);
    // TimescaleDB mode needs 2.23 or newer (its tag rollup aggregate); older runs plain mode
    const [major, minor] = /:(\d+)\.(\d+)\./.exec(db!.image!)!.slice(1).map(Number) as [number, number];
    expect(major * 1000 + minor).toBeGreaterThanOrEqual(2023);
    const test = db!.healthcheck!.test;
    expect(test.slice(0, 2)).toEqual(['CMD', 'pg_isready']);
    expect(test[test.indexOf('-h') + 1]).toBe('127.0.0.1');
  });

  it('restarts meter, gives it a stop grace period longer than its drain, and keeps /data on a named volume', () => {
    expect(meter!.restart).toBe('unless-stopped');
    const grace = /^(\d+)s$/.exec(meter!.stop_grace_period!)![1]!;
    // calls drain; then the two components that may take long to stop (the event writer's final
    // write, an alert delivery under way) each get the daemon's stop limit; then the store closes
    const worstStopMs = DRAIN_LIMIT_MS + 2 * STOP_LIMIT_MS + STORE_CLOSE_LIMIT_MS;
    expect(Number(grace) * 1000).toBeGreaterThan(worstStopMs);
    const [volume, target] = meter!.volumes![0]!.split(':');
    expect(target).toBe('/data');
    expect(compose.volumes).toHaveProperty(volume!);
    expect(meter!.depends_on?.db?.condition).toBe('service_healthy');
    expect(new URL(meter!.environment!.DATABASE_URL!).hostname).toBe('db');
    // the proxy and metrics ports published on the host's loopback only
    const metricsPort = meter!.environment!.METER_METRICS_PORT!;
    expect(meter!.ports).toEqual(['127.0.0.1:8787:8787', `127.0.0.1:${metricsPort}:${metricsPort}`]);
  });
});

/** What `npm ci --omit=dev` installs, copied from this repository's node_modules: every package
 *  of the lock file not marked dev (an optional one absent here was not installed either). */
function copyProductionModules(app: string): void {
  const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { dev?: boolean }> };
  for (const [path, p] of Object.entries(lock.packages)) {
    if (path === '' || p.dev || !existsSync(join(packageRoot, path))) continue;
    cpSync(join(packageRoot, path), join(app, path), { recursive: true, verbatimSymlinks: true });
  }
}

describe('the runtime image, laid out in a directory', () => {
  const NODE_UID = 1000; // the node user of the official node images
  const asNode = process.getuid?.() === 0;
  let app: string;
  let data: string;

  beforeAll(async () => {
    app = tempDirAtFileEnd('meter-image-');
    chmodSync(app, 0o755);
    // COPY package.json package-lock.json, then the deps stage's npm ci --omit=dev. Tests stay
    // off the network: offline, from npm's cache; a fresh HOME has an empty cache, and then the
    // same packages (what the lock file does not mark dev) come from the repository's own
    // node_modules, which `npm ci` installed from that lock file.
    for (const f of ['package.json', 'package-lock.json']) cpSync(join(packageRoot, f), join(app, f));
    try {
      execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--offline', '--no-audit', '--no-fund'], {
        cwd: app,
        stdio: 'pipe',
      });
    } catch (err) {
      if (!/ENOTCACHED|offline/i.test(`${(err as { stderr?: Buffer }).stderr}`)) throw err;
      copyProductionModules(app);
    }
    // COPY --from=build /app/dist/src ./dist/src (and cli, embedded-template), COPY sql ./sql, COPY ui ./ui
    for (const d of ['src', 'cli', 'embedded-template'])
      cpSync(join(packageRoot, 'dist', d), join(app, 'dist', d), { recursive: true });
    for (const d of ['sql', 'ui']) cpSync(join(packageRoot, d), join(app, d), { recursive: true });
    // RUN mkdir -p /data && chown node:node /data && chmod 755 dist/cli/main.js && ln -s … meter
    data = join(app, 'data');
    mkdirSync(data);
    if (asNode) chownSync(data, NODE_UID, NODE_UID);
    else console.warn('not root: the image layout runs as the current user, not uid 1000');
    chmodSync(join(app, 'dist/cli/main.js'), 0o755);
    mkdirSync(join(app, 'bin'));
    symlinkSync(join(app, 'dist/cli/main.js'), join(app, 'bin/meter'));
  }, 180_000);

  it('has production dependencies only', () => {
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string> };
    for (const dep of Object.keys(pkg.dependencies)) expect(existsSync(join(app, 'node_modules', dep)), dep).toBe(true);
    // what the lock file marks dev-only (the SDKs, vitest, typescript…) is not there
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.dev)
      .map(([path]) => path);
    expect(devOnly).toContain('node_modules/typescript');
    for (const path of devOnly) expect(existsSync(join(app, path)), path).toBe(false);
  });

  it('starts as node on the embedded store, answers its HEALTHCHECK, serves the CLI, and stops on SIGTERM', async () => {
    const ids = asNode ? { uid: NODE_UID, gid: NODE_UID } : {};
    const env = {
      PATH: `${join(app, 'bin')}:${process.env.PATH}`,
      HOME: app,
      NODE_ENV: 'production',
      METER_HOST: '127.0.0.1',
      METER_PORT: '0',
      METER_DATA_DIR: data,
    };
    const [command, ...entry] = JSON.parse(of(finalStage, 'ENTRYPOINT')[0]!.getArgumentsContent()!) as string[];
    const cmd = JSON.parse(of(finalStage, 'CMD')[0]!.getArgumentsContent()!) as string[];
    const child = spawn(command === 'node' ? process.execPath : command!, [...entry, ...cmd], {
      cwd: app,
      env,
      ...ids,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    atFileEnd(() => child.kill('SIGKILL'));
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const deadline = Date.now() + 150_000;
    while (!/meter listening on/.test(out)) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`did not start:\n${out}\n${err}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const port = new URL(/meter listening on (\S+)/.exec(out)![1]!).port;

    const [hcCommand, ...hcArgs] = healthcheckCommand();
    const health = spawnSync(hcCommand === 'node' ? process.execPath : hcCommand!, hcArgs, {
      env: { ...env, METER_PORT: port },
      ...ids,
      timeout: 10_000,
    });
    expect(health.status, String(health.stderr)).toBe(0);
    // the spend page and its chart library (a production dependency) are in the image
    for (const path of ['/ui', '/ui/uplot.js'])
      expect((await fetch(`http://127.0.0.1:${port}${path}`)).status, path).toBe(200);

    // what the node user wrote in its data directory
    for (const made of ['meter.lock', 'spool']) {
      const st = statSync(join(data, made));
      if (asNode) expect(st.uid, made).toBe(NODE_UID);
    }
    // `docker compose exec meter meter accounts create …`: the CLI on the PATH, as node
    const cli = spawnSync('meter', ['accounts', 'create', 'image-test', '--json'], {
      cwd: app,
      env,
      ...ids,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(cli.status, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ name: 'image-test' });

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(err).toContain('meter stopped');
  }, 180_000);
});
