/**
 * istio-cni entry point (the binary the container runtime executes). Kept small and free of
 * heavy imports: it reads stdin, runs one command, prints the result and exits.
 *
 * Packaged with a code cache (scripts/build-sea.mjs); it can also be packaged with a V8 startup
 * snapshot (`startup: 'snapshot'` in scripts/esbuild-options.mjs): then the bundle's modules are
 * evaluated when the snapshot is built and `start` runs when the executable starts; run any other
 * way, `start` runs at once. What ADD needs only on some paths (the API client, the iptables
 * code, the broker clients: HTTP/1.1 on a node:net socket) is imported by plugin.ts when used, so VERSION and an
 * ADD the broker answers evaluate none of it.
 */
import { readFileSync } from 'node:fs';
import { startupSnapshot } from 'node:v8';
import { runPlugin } from './plugin.js';

function readStdin(): string {
  try {
    return readFileSync(0, 'utf8');
  } catch {
    return ''; // closed or absent stdin: the command decides whether that is an error
  }
}

const INTERNAL = JSON.stringify({ cniVersion: '1.1.0', code: 999, msg: 'internal error in istio-cni plugin', details: '' }) + '\n';

function start(): void {
  let answered = false;
  // If the event loop ever drained before an answer was printed, the runtime must still see a failure.
  process.on('beforeExit', () => {
    if (!answered) {
      answered = true;
      process.stdout.write(INTERNAL, () => process.exit(1));
    }
  });

  const main = async (): Promise<void> => {
    const outcome = await runPlugin({ env: process.env, stdin: process.env.CNI_COMMAND === 'VERSION' ? '' : readStdin() });
    answered = true;
    process.stdout.write(outcome.stdout, () => process.exit(outcome.exitCode));
  };

  main().catch(() => {
    // runPlugin never rejects; this is the last line of defence, still in the spec's shape.
    answered = true;
    process.stdout.write(INTERNAL, () => process.exit(1));
  });
}

if (startupSnapshot?.isBuildingSnapshot?.()) startupSnapshot.setDeserializeMainFunction(start);
else start();
