/**
 * A Broker API X509-SVID stream as a test sees it: its messages as they come and how it ended
 * (`'ok'`, the error, or undefined while open); `leafOf` reads a message's leaf certificate.
 */
import { X509Certificate } from 'node:crypto';
import type { ClientReadableStream, ServiceError } from '@grpc/grpc-js';
import { splitDerCertificates } from '../../../src/broker/index.js';
import type { SubscribeToX509SVIDResponse as X509SvidResponse } from '../../../src/protocol/spiffe-broker.js';

/** The first SVID's leaf of a stream message. */
export function leafOf(m: X509SvidResponse): X509Certificate {
  return new X509Certificate(splitDerCertificates(m.svids[0]!.x509_svid)[0]!);
}

/** Collects messages of a stream and records how it ended. */
export class SvidRecorder {
  readonly messages: X509SvidResponse[] = [];
  ended: ServiceError | 'ok' | undefined;
  constructor(readonly stream: ClientReadableStream<X509SvidResponse>) {
    stream.on('data', (m: X509SvidResponse) => this.messages.push(m));
    stream.on('error', (e: ServiceError) => (this.ended = e));
    stream.on('end', () => (this.ended ??= 'ok'));
  }

  /** The leaf serial of each message so far (lower-case hex). */
  serials(): string[] {
    return this.messages.map((m) => leafOf(m).serialNumber.toLowerCase());
  }
}
