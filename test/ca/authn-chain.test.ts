/**
 * The authenticator chain's fall-through rule, over in-memory authenticators: only "could not
 * decide" (ERR_CA_AUTHN_BACKEND) moves on to the next authenticator; a definite rejection is final.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rejectionCode } from './support/error-code.js';
import { silentLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { AuthenticatorChain, type Authenticator } from '../../src/ca/authn/authenticator.js';
import type { Caller } from '../../src/ca/caller.js';
import { authnError, type CaAuthnCode } from '../../src/ca/errors.js';

const CALLER: Caller = { namespace: 'istio-system', serviceAccount: 'ztunnel', clusterId: 'Kubernetes', authenticator: 'jwt' };

function rejecting(kind: Caller['authenticator'], code: CaAuthnCode, asked: string[]): Authenticator {
  return {
    kind,
    authenticate: async () => {
      asked.push(kind);
      throw authnError(code, `${kind} says ${code}`);
    },
  };
}

function accepting(asked: string[]): Authenticator {
  return {
    kind: 'jwt',
    authenticate: async () => {
      asked.push('jwt');
      return CALLER;
    },
  };
}

test('a definite rejection ends the chain: the next authenticator is never asked', async () => {
  for (const code of ['ERR_CA_TOKEN_INVALID', 'ERR_CA_TOKEN_AUDIENCE', 'ERR_CA_TOKEN_EXPIRED', 'ERR_CA_TOKEN_NOT_SERVICE_ACCOUNT'] as const) {
    const asked: string[] = [];
    const chain = new AuthenticatorChain([rejecting('tokenreview', code, asked), accepting(asked)], silentLogger);
    assert.equal(await rejectionCode(chain.authenticate(new Secret('t'))), code);
    assert.deepEqual(asked, ['tokenreview'], code);
  }
});

test('a backend failure falls through to the next authenticator, which decides', async () => {
  const asked: string[] = [];
  const chain = new AuthenticatorChain([rejecting('tokenreview', 'ERR_CA_AUTHN_BACKEND', asked), accepting(asked)], silentLogger);
  assert.deepEqual(await chain.authenticate(new Secret('t')), CALLER);
  assert.deepEqual(asked, ['tokenreview', 'jwt']);

  const no: string[] = [];
  const refusing = new AuthenticatorChain([rejecting('tokenreview', 'ERR_CA_AUTHN_BACKEND', no), rejecting('jwt', 'ERR_CA_TOKEN_INVALID', no)], silentLogger);
  assert.equal(await rejectionCode(refusing.authenticate(new Secret('t'))), 'ERR_CA_TOKEN_INVALID', 'the deciding answer is reported');
});

test('nobody could decide: backend error; an unexpected exception denies without falling through', async () => {
  const asked: string[] = [];
  const allDown = new AuthenticatorChain([rejecting('tokenreview', 'ERR_CA_AUTHN_BACKEND', asked), rejecting('jwt', 'ERR_CA_AUTHN_BACKEND', asked)], silentLogger);
  assert.equal(await rejectionCode(allDown.authenticate(new Secret('t'))), 'ERR_CA_AUTHN_BACKEND');
  assert.deepEqual(asked, ['tokenreview', 'jwt']);

  const after: string[] = [];
  const buggy: Authenticator = { kind: 'tokenreview', authenticate: async () => { throw new TypeError('bug'); } };
  const chain = new AuthenticatorChain([buggy, accepting(after)], silentLogger);
  assert.equal(await rejectionCode(chain.authenticate(new Secret('t'))), 'ERR_CA_AUTHN_BACKEND');
  assert.deepEqual(after, []);
  assert.equal(await rejectionCode(new AuthenticatorChain([], silentLogger).authenticate(new Secret('t'))), 'ERR_CA_AUTHN_BACKEND');
});
