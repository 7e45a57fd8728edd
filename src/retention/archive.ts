import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { EntityManager } from '@mikro-orm/postgresql';
import { conversationInfoSummaries } from '../conversations/conversation-info-service.ts';
import { Conversation } from '../conversations/entities.ts';
import { toConversationView, toStoredEventJson } from '../conversations/mapper.ts';

/** Events read per query while archiving: memory stays bounded whatever the conversation's size. */
const PAGE_EVENTS = 1_000;

/** The archive file of a conversation under `dir`. */
export function archiveFile(dir: string, conversationId: string): string {
  return path.join(dir, `conversation-${conversationId}.ndjson.gz`);
}

/**
 * The conversation as NDJSON lines: first the conversation (as `GET /api/v1/conversations/{id}` shows
 * it), then each stored event in sequence order as `GET …/events` renders it (the stored text).
 */
async function* conversationLines(em: EntityManager, conversation: Conversation): AsyncGenerator<string> {
  const infos = await conversationInfoSummaries(em, [conversation.id]);
  yield `${JSON.stringify(toConversationView(conversation, infos.get(conversation.id)))}\n`;
  let afterSeq = 0;
  for (;;) {
    const rows = await em
      .getConnection()
      .execute<{ seq: number; received_at: string; payload: string }[]>(
        'select seq, received_at, payload::text as payload from conversation_events where conversation_id = ? and seq > ? order by seq limit ?',
        [conversation.id, afterSeq, PAGE_EVENTS],
      );
    if (rows.length === 0) return;
    yield rows.map((row) => `${toStoredEventJson(row)}\n`).join('');
    afterSeq = rows[rows.length - 1]!.seq;
  }
}

/**
 * Writes `conversation-<id>.ndjson.gz` under `dir`, durably (written under a temporary name, flushed,
 * then renamed), streaming in bounded memory. Returns the file, or undefined when the conversation no
 * longer exists.
 */
export async function writeConversationArchive(em: EntityManager, conversationId: string, dir: string): Promise<string | undefined> {
  const conversation = await em.fork().findOne(Conversation, { id: conversationId });
  if (!conversation) return undefined;
  fs.mkdirSync(dir, { recursive: true });
  const file = archiveFile(dir, conversationId);
  const partial = `${file}.partial`;
  try {
    await pipeline(Readable.from(conversationLines(em, conversation)), createGzip(), fs.createWriteStream(partial, { mode: 0o600 }));
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
