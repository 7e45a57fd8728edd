import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { SecretBox, loadOrCreateKeyFile } from '../crypto/secret-box.ts';
import { HttpIssueTracker } from './issue-tracker.ts';
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
export function createWorkspaceService(config: Config, em: EntityManager, logger?: Logger): WorkspaceService {
  const tracker = config.issueTrackerBaseUrl
    ? new HttpIssueTracker(config.issueTrackerBaseUrl, config.issueTrackerTimeoutMs)
    : undefined;
  return new WorkspaceService(em, secretBoxFor(config, logger), tracker);
}
