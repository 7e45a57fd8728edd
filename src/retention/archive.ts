import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { EntityManager } from '@mikro-orm/postgresql';
import { conversationExport, writeChunks } from '../conversations/export.ts';
import { conversationExists } from './queries.ts';

/** The archive file of a conversation under `dir`. */
export function archiveFile(dir: string, conversationId: string): string {
  return path.join(dir, `conversation-${conversationId}.ndjson.gz`);
}

/**
 * Writes `conversation-<id>.ndjson.gz` under `dir`: the conversation's export (the NDJSON of
 * `GET …/export`, streamed in bounded memory), keeping `encrypted_content` so that the archive can
 * restore it. Durable: written under a temporary name, flushed, then renamed. Returns the file, or
 * undefined when the conversation no longer exists.
 */
export async function writeConversationArchive(em: EntityManager, conversationId: string, dir: string): Promise<string | undefined> {
  if (!(await conversationExists(em, conversationId))) return undefined;
  fs.mkdirSync(dir, { recursive: true });
  const file = archiveFile(dir, conversationId);
  const partial = `${file}.partial`;
  try {
    const gzip = createGzip();
    const written = pipeline(gzip, fs.createWriteStream(partial, { mode: 0o600 }));
    const exported = writeChunks(conversationExport(em, conversationId, { keepEncryptedContent: true }), gzip).then(
      () => gzip.end(),
      (error: unknown) => gzip.destroy(error as Error),
    );
    await Promise.all([exported, written]);
    const fd = fs.openSync(partial, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(partial, file);
  } catch (error) {
    fs.rmSync(partial, { force: true });
    throw error;
  }
  const dirFd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(dirFd);
  } finally {
    fs.closeSync(dirFd);
  }
  return file;
}
