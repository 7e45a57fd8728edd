import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { isAlive } from '../../src/db/embedded-postgres.ts';
import { parsePrometheusText } from '../helpers/prometheus.ts';
import {
  createDataDir,
  describeRun,
  freePort,
  killAllProcesses,
  postmasterPid,
  ROOT,
  serverEnvironment,
  spawnProcess,
  startServerProcess,
  stopLeftoverPostgres,
  stopWith,
  useEmbedded,
} from '../helpers/server-process.ts';

/** Every `.js` file under `dir`. */
function javascriptFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return javascriptFiles(full);
    return entry.name.endsWith('.js') ? [full] : [];
  });
}

describe('production start (npm run build, then node dist/src/main.js)', function () {
  this.timeout(240_000);

  let dataDir: string;
  let embeddedPgPort: number;

  before(async function () {
    dataDir = createDataDir('production');
    embeddedPgPort = await freePort();
    const build = spawnProcess('npm', ['run', 'build'], { ...process.env });
    const { code } = await build.exited;
    expect(code, describeRun(build)).to.equal(0);
  });

  afterEach(async () => {
    await killAllProcesses();
    if (useEmbedded) await stopLeftoverPostgres(dataDir);
  });

  after(async () => {
    if (useEmbedded) await stopLeftoverPostgres(dataDir);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const environment = () => serverEnvironment({ dataDir, embeddedPgPort }, { NODE_OPTIONS: '' });

  it('compiles to JavaScript whose relative imports name .js files only', () => {
    const files = javascriptFiles(path.join(ROOT, 'dist', 'src'));
    expect(files.map((file) => path.relative(ROOT, file))).to.include('dist/src/main.js');
    for (const file of files) {
      const text = fs.readFileSync(file, 'utf8');
      const relativeImports = [...text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1]!);
      for (const specifier of relativeImports) expect(specifier, `${file} imports ${specifier}`).to.match(/\.js$/);
    }
  });

  it('serves the API with plain node (no TypeScript loader) and stops cleanly on SIGTERM', async () => {
    const server = await startServerProcess(environment(), {
      launch: (env) => spawnProcess(process.execPath, ['dist/src/main.js'], env),
    });
    console.log(`      node dist/src/main.js: /readyz 200 after ${server.startupMs} ms`);
    // Node 20 cannot load a .ts file by itself, so serving at all shows the compiled code runs;
    // the command line shows nothing else was loaded.
    const commandLine = fs.readFileSync(`/proc/${server.child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    expect(commandLine).to.deep.equal([process.execPath, 'dist/src/main.js']);
    const metrics = await fetch(`${server.baseUrl}/metrics`);
    expect(metrics.status).to.equal(200);
    expect(parsePrometheusText(await metrics.text()).has('http_requests_total')).to.equal(true);
    expect((await fetch(`${server.baseUrl}/docs`)).status).to.equal(200);
    expect((await fetch(`${server.baseUrl}/openapi.yaml`)).status).to.equal(200);

    const { code } = await stopWith(server, 'SIGTERM');
    expect(code, describeRun(server)).to.equal(0);
    expect(server.stdout).to.include('"msg":"stopped"');
    if (useEmbedded) {
      const pid = postmasterPid(dataDir);
      expect(pid === undefined || !isAlive(pid), 'the embedded PostgreSQL stopped with the server').to.equal(true);
    }
  });

  it('npm run start:prod passes SIGTERM on to the server, which stops cleanly', async () => {
    const server = await startServerProcess(environment(), {
      launch: (env) => spawnProcess('npm', ['run', '--silent', 'start:prod'], env),
    });
    const { code } = await stopWith(server, 'SIGTERM');
    expect(code, describeRun(server)).to.equal(0);
    expect(server.stdout).to.include('"msg":"stopped"');
    if (useEmbedded) {
      const pid = postmasterPid(dataDir);
      expect(pid === undefined || !isAlive(pid), 'the embedded PostgreSQL stopped with the server').to.equal(true);
    }
  });
});
