/** Prepends the do-not-edit banner to a generated file (run by `npm run generate`). */
import fs from 'node:fs';

const BANNER =
  '// DO NOT EDIT. Generated from spec/openapi.yaml by openapi-typescript (`npm run generate`).\n' +
  '// CI regenerates this file and fails when it differs from the committed copy.\n\n';

const file = process.argv[2];
if (!file) throw new Error('usage: banner.ts <file>');
const text = fs.readFileSync(file, 'utf8');
if (!text.startsWith(BANNER)) fs.writeFileSync(file, BANNER + text);
