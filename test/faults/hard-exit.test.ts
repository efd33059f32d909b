/**
 * Fault suite — the lifecycle's last resort: a process that something keeps alive after SIGTERM
 * (here a connection to a server that never answers, which nothing closes) exits anyway once its
 * grace period has passed, logging what was still open; a process whose work ends exits on its
 * own, well before the hard exit (the timer never holds it).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startHungServer, type HungServer } from '../support/hung-server.js';

const LIFECYCLE = fileURLToPath(new URL('../../src/ops/lifecycle.js', import.meta.url));
const LOG = fileURLToPath(new URL('../../src/core/log.js', import.meta.url));

/** A process that arms the signal controller, says "ready", and on SIGTERM does `onStop`. */
function run(script: string): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string; stdout: string }> {
  const source = `
    import { signalController } from ${JSON.stringify(LIFECYCLE)};
    import { createLogger } from ${JSON.stringify(LOG)};
    const controller = signalController(createLogger({ level: 'info' }), { hardExitAfterMs: 500 });
    ${script}
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', source], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
    if (stdout.includes('ready\n')) child.kill('SIGTERM');
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, stderr, stdout });
    }),
  );
}

describe('fault: hard exit after the grace period', () => {
  let server: HungServer;
  before(async () => {
    server = await startHungServer();
  });
  after(async () => {
    await server.close();
  });

  it('a connection nothing closes: exits 1 after the grace period, naming what was open', async () => {
    const r = await run(`
      import('node:net').then(({ connect }) => {
        const s = connect(${server.port}, '127.0.0.1', () => process.stdout.write('ready\\n'));
        s.on('error', () => undefined);
      });
    `);
    assert.equal(r.signal, null, `killed by the guard: ${r.stderr}`);
    assert.equal(r.code, 1, r.stderr);
    const rec = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; graceMs?: number; stillOpen?: Record<string, number> })
      .find((l) => l.msg === 'shutdown did not finish within its grace period; exiting now');
    assert.ok(rec, r.stderr);
    assert.equal(rec.graceMs, 500);
    assert.ok((rec.stillOpen?.TCPSocketWrap ?? 0) >= 1, JSON.stringify(rec.stillOpen));
  });

  it('work that ends on the signal: exits 0 by itself, the hard-exit timer holds nothing', async () => {
    const r = await run(`
      const keepAlive = setInterval(() => undefined, 1000);
      controller.signal.addEventListener('abort', () => clearInterval(keepAlive));
      process.stdout.write('ready\\n');
    `);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /grace period/);
  });
});
