/**
 * Request bodies in (size-limited, content-type checked, JSON or YAML decoded) and JSON
 * responses out. Every decoding problem is a Status error, so a bad request can never throw
 * past the handler.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { ApiError, badRequest, tooLarge, unsupportedMediaType } from './status.js';
import { decodeKubeProtobuf } from './protobuf.js';

export const DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024;

export const BODY_TYPES = ['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf'] as const;
export const PATCH_TYPES = [
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
  'application/apply-patch+yaml',
] as const;

export function mediaType(req: IncomingMessage): string {
  const raw = req.headers['content-type'] ?? '';
  return raw.split(';')[0]!.trim().toLowerCase();
}

export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? '0');
    if (declared > limitBytes) {
      req.resume();
      reject(tooLarge(limitBytes));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (c: Buffer) => {
      if (failed) return;
      size += c.length;
      if (size > limitBytes) {
        failed = true;
        reject(tooLarge(limitBytes));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (!failed) resolve(Buffer.concat(chunks));
    });
    req.on('error', (err) => {
      if (!failed) reject(err);
    });
  });
}

/** Decodes a body of one of `accepted` media types; anything else is a 415. */
export function decodeBody(contentType: string, body: Buffer, accepted: readonly string[]): unknown {
  if (!accepted.includes(contentType)) throw unsupportedMediaType(contentType, accepted);
  if (contentType === 'application/vnd.kubernetes.protobuf') return decodeKubeProtobuf(body);
  const text = body.toString('utf8');
  if (text.trim() === '') throw badRequest('the request body is empty');
  if (contentType.endsWith('yaml')) {
    try {
      return parseYaml(text);
    } catch (err) {
      throw badRequest(`error decoding YAML: ${err instanceof Error ? err.message.split('\n')[0] : 'invalid YAML'}`);
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw badRequest(`json: cannot decode request body: ${err instanceof Error ? err.message : 'invalid JSON'}`);
  }
}

/** The head of a JSON answer of `length` bytes. */
function writeJsonHead(res: ServerResponse, code: number, length: number, headers: Record<string, string> = {}): void {
  res.writeHead(code, { 'content-type': 'application/json', 'cache-control': 'no-cache, private', 'content-length': length, ...headers });
}

export function sendJson(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  writeJsonHead(res, code, Buffer.byteLength(text), headers);
  res.end(text);
}

export function sendError(res: ServerResponse, err: ApiError): void {
  sendJson(res, err.httpCode, err.toStatus(), { ...err.headers });
}

/** Items per write of a JSON list body: ~100-200 KB chunks of ~1-3 KB objects. */
const LIST_CHUNK_ITEMS = 64;

/**
 * A JSON list whose items are already JSON texts: the same bytes as `sendJson` of
 * `{...envelope, items}`, written in chunks of cached texts joined with commas rather than
 * serialized as one string.
 */
export function sendJsonList(res: ServerResponse, code: number, envelope: object, items: readonly string[]): void {
  if (res.headersSent || res.destroyed) return;
  const head = `${JSON.stringify(envelope).slice(0, -1)},"items":[`;
  let length = Buffer.byteLength(head) + 2 + Math.max(0, items.length - 1);
  for (const item of items) length += Buffer.byteLength(item);
  writeJsonHead(res, code, length);
  res.write(head);
  for (let i = 0; i < items.length; i += LIST_CHUNK_ITEMS) {
    const chunk = items.slice(i, i + LIST_CHUNK_ITEMS).join(',');
    res.write(i === 0 ? chunk : `,${chunk}`);
  }
  res.end(']}');
}
