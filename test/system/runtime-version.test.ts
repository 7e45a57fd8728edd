import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { describeRun, ROOT, spawnProcess } from '../helpers/server-process.ts';

/** Debian's own Node.js, older than `engines`: what a newcomer may have on the machine. */
const SYSTEM_NODE = '/usr/bin/node';

describe('npm start on a Node.js older than engines', function () {
  this.timeout(60_000);

  it('prints one line naming the supported version and the command that runs it, and starts nothing', async function () {
    const { engines } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    const required = Number(/^>=\s*(\d+)/.exec(engines.node)![1]);
    const version = fs.existsSync(SYSTEM_NODE) ? spawnProcess(SYSTEM_NODE, ['--version'], process.env) : undefined;
    if (!version || (await version.exited).code !== 0 || Number(/^v(\d+)/.exec(version.stdout)?.[1]) >= required) this.skip();
    const systemVersion = version!.stdout.trim().slice(1);

    // The system's node and npm first on PATH, as on a machine where Node.js 24 was never installed.
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${path.dirname(SYSTEM_NODE)}:${process.env.PATH}`, PORT: '0' };
    for (const name of Object.keys(env)) if (name.startsWith('npm_')) delete env[name];
    const run = spawnProcess('npm', ['start'], env);
    const { code } = await run.exited;
    expect(code, describeRun(run)).to.equal(1);
    const lines = run.stderr.split('\n').filter((line) => line.trim() !== '');
    expect(lines, describeRun(run)).to.deep.equal([
      `agent-platform-control-plane needs Node.js ${engines.node} (this is ${systemVersion}); run it with Node.js ${required} from the npm registry: npx -p node@${required} -- npm start`,
    ]);
    // npm's own banner only: no log line of the server, which never started.
    expect(run.stdout.split('\n').filter((line) => line.startsWith('{')), describeRun(run)).to.deep.equal([]);
  });

  it('the README gives that command', () => {
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')).to.include('npx -p node@24 -- npm start');
  });
});
