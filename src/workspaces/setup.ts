import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { SecretBox, loadOrCreateKeyFile } from '../crypto/secret-box.ts';
import { HttpIssueTracker } from './issue-tracker.ts';
import { secretKeyIds } from './queries.ts';
import { WorkspaceService } from './workspace-service.ts';

/** The keyring the configuration names: `SECRETS_ENCRYPTION_KEYS`, else the key file in the data directory. */
export function secretBoxFor(config: Config, logger?: Logger): SecretBox {
  if (config.secretsEncryptionKeys) return new SecretBox(config.secretsEncryptionKeys);
  if (config.database.kind === 'url') {
    // Every server on that database must hold the same key: a per-machine file only works for one.
    logger?.warn(
      { keyFile: `${config.dataDir}/secrets.key` },
      'SECRETS_ENCRYPTION_KEYS is not set: workspace secrets are encrypted with the key file in DATA_DIR',
    );
  }
  return new SecretBox(loadOrCreateKeyFile(config.dataDir));
}

/** The workspace service as the configuration asks for it (tracker verification when a base URL is set). */
export function createWorkspaceService(config: Config, em: EntityManager, secretBox: SecretBox = secretBoxFor(config)): WorkspaceService {
  const tracker = config.issueTrackerBaseUrl
    ? new HttpIssueTracker(config.issueTrackerBaseUrl, config.issueTrackerTimeoutMs)
    : undefined;
  return new WorkspaceService(em, secretBox, tracker);
}

/**
 * The start-up check of the keyring against the stored secrets: the one line to exit with when a
 * stored workspace secret names a key id that the keyring lacks, else undefined. Without it the
 * server would start and answer the tracker's first delivery with an error; rotation keeps the old
 * key in the keyring until `reseal-secrets` has run, so it never trips a correct rotation.
 */
export async function missingSecretKeysProblem(config: Config, em: EntityManager, logger?: Logger): Promise<string | undefined> {
  const missing = secretBoxFor(config, logger).missingKeyIds(await secretKeyIds(em));
  if (missing.length === 0) return undefined;
  const source = config.secretsEncryptionKeys ? 'SECRETS_ENCRYPTION_KEYS' : `the key file ${config.dataDir}/secrets.key`;
  return `stored workspace secrets are encrypted with key id(s) ${missing.join(', ')}, which ${source} does not hold: add the key(s) (see "Rotating the encryption key" in the README) and start again`;
}
