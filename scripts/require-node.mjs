// Loaded first by `npm start` (`node --import`), before anything a newer Node.js may be needed for:
// on a Node.js older than package.json's "engines", one line naming the version and the command that runs it.
import { readFileSync } from 'node:fs';

const { name, engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const wanted = /^>=\s*(\d+)\.(\d+)\.(\d+)$/.exec(engines.node.trim());
const running = process.versions.node.split('.').map(Number);
if (!wanted) throw new Error(`scripts/require-node.mjs reads only ">=x.y.z" engines, not "${engines.node}"`);
const required = wanted.slice(1).map(Number);
const firstDifference = required.findIndex((part, i) => running[i] !== part);
const older = firstDifference >= 0 && running[firstDifference] < required[firstDifference];
if (older) {
  const script = process.env.npm_lifecycle_event;
  const npmCommand = !script ? 'npm start' : script === 'start' ? 'npm start' : `npm run ${script}`;
  process.stderr.write(
    `${name} needs Node.js ${engines.node} (this is ${process.versions.node}); run it with Node.js ${required[0]} from the npm registry: npx -p node@${required[0]} -- ${npmCommand}\n`,
  );
  process.exit(1);
}
