/** `npm run admin -- <command> [options]`: the admin CLI (scripts/lib/admin-cli.ts) on this process's settings and streams. */
import { pino } from 'pino';
import { runAdmin } from './lib/admin-cli.ts';

process.exitCode = await runAdmin(process.argv.slice(2), {
  env: process.env,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  log: pino.destination(2),
});
